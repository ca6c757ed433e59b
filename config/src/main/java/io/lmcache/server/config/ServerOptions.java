package io.lmcache.server.config;

import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Help;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.Option;

/**
 * The command line as picocli sees it: LMCache's `lmcache server` flag names and defaults. Raw
 * values only; {@link ConfigLoader} validates them into a {@link ServerConfig}.
 */
@Command(
        name = "lmcache-server",
        mixinStandardHelpOptions = true,
        versionProvider = Versions.class,
        sortOptions = false,
        usageHelpAutoWidth = true,
        abbreviateSynopsis = true,
        description = {
            "A KV-cache server for vLLM's LMCacheMPConnector: speaks LMCache's multiprocess (MP) protocol "
                    + "over ZeroMQ, keeps KV chunks in a host-memory pool (L1) and serves them back.",
            "Values can also come from a TOML file (--config-file or LMCACHE_MP_CONFIG) whose keys are "
                    + "the flag names (l1_size_gb or l1-size-gb); flags given here win. Every flag of LMCache's `lmcache server` "
                    + "is accepted: those that change nothing here warn, those whose feature is missing are refused."
        },
        footerHeading = "%nEnvironment:%n",
        footer = {
            "  LMCACHE_LOG_LEVEL         DEBUG, INFO (when unset), WARNING or ERROR",
            "  LMCACHE_LOG_FORMAT        json: each log line a JSON object (time, level, thread, logger, message)",
            "  LMCACHE_HTTP_ADMIN_TOKEN  the admin token, when --http-admin-token is not given",
            "  LMCACHE_MP_CONFIG         the TOML file, when --config-file is not given",
            "  PYTHONHASHSEED            the root of --hash-algorithm sha256_cbor, as on the fleet's vLLM",
            "  LMCACHE_RESP_HOST, LMCACHE_RESP_PORT, LMCACHE_RESP_USERNAME, LMCACHE_RESP_PASSWORD",
            "                            override a resp L2 adapter's JSON, as in LMCache",
            "Read by the launcher (bin/lmcache-server):",
            "  JAVA_HOME                 a Java 25 or newer runtime (default: /usr/lib/jvm/temurin-25-jdk-amd64)",
            "  LMCACHE_JAVA_OPTS         more JVM flags: -Xmx, the -Dlmcache.* knobs of docs/internals.md",
            "  LMCACHE_AOT_CACHE         the ahead-of-time cache file (default: server/target/lmcache-server.aot)",
            "  LMCACHE_AOT_TRAIN         0: build without training the ahead-of-time cache",
            "",
            "Examples:",
            "  # a 20 GiB pool; ZeroMQ on localhost:5555, HTTP status and /metrics on port 8080",
            "  lmcache-server --l1-size-gb 20",
            "  # reachable from other pods, a transfer lane per tensor-parallel rank",
            "  lmcache-server --host 0.0.0.0 --l1-size-gb 200 --max-gpu-workers 8",
            "  # with a disk tier that survives restarts",
            "  lmcache-server --l1-size-gb 200 --l2-adapter '{\"type\":\"fs_native\",\"base_path\":\"/nvme/l2\"}'",
            "  # chunk hashes as vLLM's, for NVIDIA Dynamo's KV-aware router",
            "  PYTHONHASHSEED=0 lmcache-server --l1-size-gb 200 --chunk-size 16 --hash-algorithm sha256_cbor",
            "  # the flags from a TOML file (keys are the flag names)",
            "  lmcache-server --config-file /etc/lmcache/server.toml",
            "",
            "Docs: README.md and docs/configuration.md in the repository."
        })
final class ServerOptions {

    /**
     * The help's topics, in order, each with its flags in order. A visible flag missing here is still listed, under "Other"
     * (ServerOptionsHelpTest fails on it), so a new flag is never hidden from --help.
     */
    static final Map<String, List<String>> TOPICS = topics(
            "Server", List.of("--host", "--port", "--device", "--instance-id", "--config-file"),
            "Connections and frames", List.of("--max-message-mb", "--max-connections", "--connection-stall-timeout-seconds"),
            "L1 pool (host memory)", List.of("--l1-size-gb", "--l1-region-size-mb", "--l1-write-ttl-seconds", "--l1-read-ttl-seconds",
                    "--numa-placement", "--shm-name", "--shm-mode"),
            "Chunks and keys", List.of("--chunk-size", "--hash-algorithm", "--separate-object-groups", "--no-separate-object-groups"),
            "Eviction", List.of("--eviction-policy", "--eviction-trigger-watermark", "--eviction-ratio", "--tenant-read-lock-share"),
            "L2 tier", List.of("--l2-adapter", "--l2-store-policy", "--l2-prefetch-policy", "--l2-prefetch-max-in-flight", "--l2-prefetch-load-timeout",
                    "--l2-admission", "--l2-write-budget-bytes-per-second"),
            "Turn-boundary commits", List.of("--commit-policy", "--commit-anchor", "--commit-boundary-tokens"),
            "Workers", List.of("--max-workers", "--max-gpu-workers", "--max-cpu-workers", "--supported-transfer-mode",
                    "--worker-reap-timeout-seconds", "--worker-registration-grace-seconds", "--worker-disconnect-grace-seconds",
                    "--isolated-ipc", "--no-isolated-ipc", "--layerwise-batch", "--shm-allow-any-owner", "--shm-max-segments", "--shm-max-mapped-gb",
                    "--cpu-copy-threads"),
            "KV events (KV-aware routing)", List.of("--kv-event-log-size"),
            "LMCache fleet (coordinator)", List.of("--coordinator-url", "--coordinator-advertise-ip", "--coordinator-heartbeat-interval",
                    "--coordinator-event-reporting", "--coordinator-event-flush-interval"),
            "Diagnostics (lookup-hash logs, event traces)", List.of("--lookup-hash-log-dir", "--lookup-hash-log-rotation-interval",
                    "--lookup-hash-log-rotation-max-size", "--lookup-hash-log-max-files", "--trace-level", "--trace-output"),
            "HTTP and metrics", List.of("--http-host", "--http-port", "--http-admin-token", "--prometheus-port",
                    "--metrics-clear-salt-labels", "--metrics-sample-rate",
                    "--service-instance-id"),
            "Start-up warm-up", List.of("--warmup-iterations", "--warmup-budget-ms", "--warmup-background-ms", "--gpu-warmup-budget-ms",
                    "--gpu-warmup-register-wait-ms"),
            "Help", List.of("--help", "--version"));

    private static Map<String, List<String>> topics(Object... headingsAndFlags) {
        Map<String, List<String>> topics = new LinkedHashMap<>();
        for (int i = 0; i < headingsAndFlags.length; i += 2) {
            @SuppressWarnings("unchecked")
            List<String> flags = (List<String>) headingsAndFlags[i + 1];
            topics.put((String) headingsAndFlags[i], flags);
        }
        return topics;
    }

    /** Lists the options of {@code commandLine} (made over a ServerOptions) by topic, each under its heading. */
    static CommandLine withTopics(CommandLine commandLine) {
        Map<String, CommandLine.IHelpSectionRenderer> sections = new LinkedHashMap<>(commandLine.getHelpSectionMap());
        sections.put(CommandLine.Model.UsageMessageSpec.SECTION_KEY_OPTION_LIST_HEADING, help -> "");
        sections.put(CommandLine.Model.UsageMessageSpec.SECTION_KEY_OPTION_LIST, ServerOptions::optionsByTopic);
        commandLine.setHelpSectionMap(sections);
        return commandLine;
    }

    private static String optionsByTopic(Help help) {
        StringBuilder out = new StringBuilder();
        Set<OptionSpec> listed = new LinkedHashSet<>();
        for (Map.Entry<String, List<String>> topic : TOPICS.entrySet()) {
            List<OptionSpec> options = topic.getValue().stream().map(help.commandSpec()::findOption)
                    .filter(option -> option != null && !option.hidden()).toList();
            listed.addAll(options);
            out.append(section(help, topic.getKey(), options));
        }
        List<OptionSpec> other = help.commandSpec().options().stream().filter(o -> !o.hidden() && !listed.contains(o)).toList();
        return out.append(section(help, "Other", other)).toString();
    }

    private static String section(Help help, String heading, List<OptionSpec> options) {
        if (options.isEmpty()) {
            return "";
        }
        Help.Layout layout = help.createDefaultLayout();
        for (OptionSpec option : options) {
            layout.addOption(option, help.parameterLabelRenderer());
        }
        return String.format("%n%s:%n", heading) + layout;
    }

    // --- MP server -------------------------------------------------------------------------
    @Option(names = "--host", paramLabel = "<address>", defaultValue = "localhost",
            description = "Address the ZeroMQ ROUTER binds (default: ${DEFAULT-VALUE}).")
    String host;

    @Option(names = "--port", paramLabel = "<port>", defaultValue = "5555", description = "ZeroMQ port (default: ${DEFAULT-VALUE}).")
    String port;

    /*
     * The largest real frame is a few MiB, so 16 leaves about three times that:
     * - a LOOKUP/STORE/RETRIEVE key carries the whole prompt's token ids as msgpack ints, at most 5 bytes
     *   each for any id under 2^32 (every vocabulary; 3 bytes below 65 536): a 1M-token prompt (the
     *   longest context vLLM serves, e.g. Qwen2.5-1M) is 5 MB, about 4.8 MiB; 16 MiB holds 3.3M tokens
     *   (1.8M even at 9 bytes an id);
     * - STORE/RETRIEVE block ids come in a frame of their own: 1M tokens in 16-token blocks is 65 536 ids,
     *   at most 320 KiB per KV group;
     * - REGISTER_KV_CACHE sends one pickled wrapper of about 420 bytes per layer tensor: 4 096 tensors
     *   are 1.7 MiB;
     * - REPORT_BLOCK_ALLOCATION carries one scheduler step's new tokens, fewer than a whole prompt.
     * JeroMQ allocates a frame whole as soon as its length arrives, so each connection can hold one
     * frame of this size: bin/lmcache-server's 1 GiB of direct memory takes 64 such connections.
     */
    @Option(names = "--max-message-mb", paramLabel = "<mb>", defaultValue = "16",
            description = "Largest ZeroMQ frame accepted, in MiB, 1..1024; a longer declared frame closes the connection before anything is "
                    + "allocated. 16 holds a key of a 3-million-token prompt (default: ${DEFAULT-VALUE}).")
    String maxMessageMb;

    @Option(names = "--max-connections", paramLabel = "<n>",
            description = "ZeroMQ connections open at once; one over the cap is closed as it is accepted, counted "
                    + "(lmcache_mp_zeromq_connections_refused_total). Default: the descriptor limit (ulimit -n) less a quarter of it "
                    + "(at least 256) for HTTP, L2 and the pool.")
    String maxConnections;

    @Option(names = "--connection-stall-timeout-seconds", paramLabel = "<seconds>", defaultValue = "30",
            description = "A ZeroMQ connection that completes no message, neither a request nor the answer to the server's heartbeat, "
                    + "for this long is closed (a peer stalled mid-frame or silent), 1..3600 (default: ${DEFAULT-VALUE}).")
    String connectionStallTimeoutSeconds;

    @Option(names = "--chunk-size", paramLabel = "<tokens>", defaultValue = "256",
            description = "Tokens per stored chunk; vLLM's block size must divide it (default: ${DEFAULT-VALUE}).")
    String chunkSize;

    // two flags rather than picocli's negatable one, so each is listed (and found in --help) by its own name
    @Option(names = "--separate-object-groups",
            description = "Hybrid models: store each kind of KV group (full attention, each sliding window, Mamba/GDN state) in objects of its"
                    + " own, so a LOOKUP needs only the windows it serves (the default).")
    boolean separateObjectGroups;

    @Option(names = "--no-separate-object-groups",
            description = "Hybrid models: one object per chunk for all KV groups, looked up as full attention.")
    boolean noSeparateObjectGroups;

    @Option(names = "--isolated-ipc",
            description = "Expect LMCache's isolated-IPC workers (lmcache.mp.isolated_ipc): timeline-semaphore events, no hostIPC. Each"
                    + " event is read for what it is and answered in kind; a request of the other kind is served and warned about.")
    boolean isolatedIpc;

    @Option(names = "--no-isolated-ipc",
            description = "Expect CUDA IPC events (the default); a timeline-semaphore request is still served, with a warning.")
    boolean noIsolatedIpc;

    @Option(names = "--layerwise-batch", paramLabel = "<n>", defaultValue = "0",
            description = "LMCache's layer-wise mode for vLLM's LMCacheLayerwiseMPConnector: RETRIEVE_LAYERWISE signals a pooled CUDA event"
                    + " per <n> layers; plain RETRIEVE is refused. 0 = off (default: ${DEFAULT-VALUE}).")
    String layerwiseBatch;

    @Option(names = "--max-workers", paramLabel = "<n>",
            description = "Threads per handler pool unless the two flags below say otherwise (default: 1; the transfer lanes, when"
                    + " neither flag is given and no GPU serves: one per " + ServerConfig.CORES_PER_HOST_LANE + " cores, up to "
                    + ServerConfig.MAX_DEFAULT_HOST_LANES + ").")
    String maxWorkers;

    @Option(names = "--max-gpu-workers", paramLabel = "<n>",
            description = "Transfer lanes for STORE/RETRIEVE; one worker's transfers always stay on one lane, in order (default:"
                    + " --max-workers if given, else " + ServerConfig.LMCACHE_TRANSFER_LANES + " where a GPU serves and one per "
                    + ServerConfig.CORES_PER_HOST_LANE + " cores up to " + ServerConfig.MAX_DEFAULT_HOST_LANES + " without one).")
    String maxGpuWorkers;

    @Option(names = "--max-cpu-workers", paramLabel = "<n>",
            description = "Threads for LOOKUP, QUERY, CLEAR and the other NORMAL handlers (default: --max-workers).")
    String maxCpuWorkers;

    @Option(names = "--supported-transfer-mode", paramLabel = "<mode>", defaultValue = "auto",
            description = "auto, lmcache_driven or engine_driven (default: ${DEFAULT-VALUE}).")
    String supportedTransferMode;

    @Option(names = "--shm-name", paramLabel = "<name>",
            description = "Name of the L1 pool's segment in /dev/shm; \"\" = anonymous memory, which disables engine-driven shared-memory transfers "
                    + "(default: lmcache_l1_pool_<pid>).")
    String shmName;

    @Option(names = "--shm-allow-any-owner",
            description = "Map a CPU worker's /dev/shm segments whoever owns them; by default only segments owned by the server's own user "
                    + "are mapped (LMCache's workers run as that user).")
    boolean shmAllowAnyOwner;

    @Option(names = "--worker-reap-timeout-seconds", paramLabel = "<seconds>", defaultValue = "120",
            description = "Reap a worker that has pinged and then stayed silent this long; 0 disables the reaper, else at least 30 (default: "
                    + "${DEFAULT-VALUE}).")
    String workerReapTimeoutSeconds;

    @Option(names = "--worker-registration-grace-seconds", paramLabel = "<seconds>", defaultValue = "3600",
            description = "Reap a registered worker that never pinged (and whose connection is gone) after this long; at least the reap timeout "
                    + "(default: ${DEFAULT-VALUE}).")
    String workerRegistrationGraceSeconds;

    @Option(names = "--worker-disconnect-grace-seconds", paramLabel = "<seconds>",
            description = "Reap the workers of a closed ZeroMQ connection after this long; 0 disables, else between 30 and the reap timeout (default: "
                    + "min(60, reap timeout), 0 when the reaper is off).")
    String workerDisconnectGraceSeconds;

    @Option(names = "--instance-id", paramLabel = "<id>", description = "This server's identity in logs and status (default: a random UUID).")
    String instanceId;

    @Option(names = "--hash-algorithm", paramLabel = "<name>", defaultValue = "blake3",
            description = "Chunk-hash chain, the same on every server sharing a cache: blake3 (LMCache's default) or sha256_cbor (vLLM's,"
                    + " rooted at PYTHONHASHSEED, which must then be set as on the fleet's vLLM and LMCache processes); builtin is refused"
                    + " (default: ${DEFAULT-VALUE}).")
    String hashAlgorithm;

    @Option(names = "--kv-event-log-size", paramLabel = "<records>",
            description = "Records the KV-event log keeps for KV-aware routers (poll_kv_events, subscribe_kv_events); 0 turns the channel off;"
                    + " the log keeps each record's chunk of token ids, at most 16 Mi token ids in all (default: 32768, fewer for chunks"
                    + " over 512 tokens).")
    String kvEventLogSize;

    // LMCache's window commit (docs/design "Sliding-window commits: --commit-policy", stored text id 69066784989): opt-in
    @Option(names = "--commit-policy", paramLabel = "<policy>", defaultValue = "never",
            description = "never, or stop_token: at END_SESSION of a turn that ended on a stop token, write the request's last window of "
                    + "each sliding-window object group to L2 at once (the L1 copy stays) (default: ${DEFAULT-VALUE}).")
    String commitPolicy;

    @Option(names = "--commit-anchor", paramLabel = "<anchor>", defaultValue = "generation_end",
            description = "Where a committed window ends: generation_end (the last chunk the request stored) or prompt_end (the end of its "
                    + "looked-up prompt) (default: ${DEFAULT-VALUE}).")
    String commitAnchor;

    @Option(names = "--commit-boundary-tokens", paramLabel = "<token>", split = ",",
            description = "Token ids stop_token accepts as a turn boundary at generation_end, comma-separated (e.g. 151645, Qwen's "
                    + "<|im_end|>); none: any stop token.")
    List<String> commitBoundaryTokens;

    @Option(names = "--config-file", paramLabel = "<file>", description = "TOML file with defaults for these flags (or env LMCACHE_MP_CONFIG).")
    String configFile;

    @Option(names = "--device", paramLabel = "<device>", defaultValue = "auto",
            description = "auto (CUDA when a driver and GPU are present), cuda (required) or host (CPU workers only) (default: ${DEFAULT-VALUE}).")
    String device;

    @Option(names = "--numa-placement", paramLabel = "<mode>", defaultValue = "auto",
            description = "auto: on a host with several NUMA nodes, place the pool's regions on the nodes of the GPUs (mbind, or first "
                    + "touch where a container forbids it); off: leave placement to the kernel (default: ${DEFAULT-VALUE}).")
    String numaPlacement;

    // --- L1 ----------------------------------------------------------------------------------
    @Option(names = "--l1-size-gb", paramLabel = "<gb>", description = "Size of the host-memory pool in GiB (required).")
    String l1SizeGb;

    @Option(names = "--l1-region-size-mb", paramLabel = "<mb>",
            description = "Pool regions (pinned one by one; no chunk spans two), a multiple of 2 (default: pool/16 clamped to 64..1024).")
    String l1RegionSizeMb;

    @Option(names = "--l1-write-ttl-seconds", paramLabel = "<seconds>", defaultValue = "600",
            description = "A write lock left by a client that never finished expires after this (default: ${DEFAULT-VALUE}).")
    String l1WriteTtlSeconds;

    @Option(names = "--l1-read-ttl-seconds", paramLabel = "<seconds>", defaultValue = "300",
            description = "Lookup read locks expire after this (default: ${DEFAULT-VALUE}).")
    String l1ReadTtlSeconds;

    // --- eviction ----------------------------------------------------------------------------
    @Option(names = "--eviction-policy", paramLabel = "<policy>", defaultValue = "LRU",
            description = "LRU (by bytes), ARC, S3FIFO, IsolatedLRU (per cache_salt soft quotas, see /quota) or noop (default: ${DEFAULT-VALUE}).")
    String evictionPolicy;

    @Option(names = "--eviction-trigger-watermark", paramLabel = "<ratio>", defaultValue = "0.8",
            description = "Pool usage at which background eviction starts, in (0, 1] (default: ${DEFAULT-VALUE}).")
    String evictionTriggerWatermark;

    @Option(names = "--eviction-ratio", paramLabel = "<ratio>", defaultValue = "0.2",
            description = "Fraction of the pool one background eviction frees, in (0, 1] (default: ${DEFAULT-VALUE}).")
    String evictionRatio;

    @Option(names = "--tenant-read-lock-share", paramLabel = "<share>", defaultValue = "" + TenantSettings.DEFAULT_READ_LOCK_SHARE,
            description = "Largest share of the pool one tenant's (cache salt's) LOOKUP read locks may hold, in (0, 1]; a LOOKUP past"
                    + " it gets fewer hits, counted (default: ${DEFAULT-VALUE}).")
    String tenantReadLockShare;

    // --- L2 ----------------------------------------------------------------------------------
    @Option(names = "--l2-adapter", paramLabel = "<json>",
            description = "An L2 adapter as a JSON object with a \"type\" (fs_native, fault_inject, resp, valkey, s3), e.g. "
                    + "'{\"type\":\"fs_native\",\"base_path\":\"/data/l2\"}'. Repeatable: the order is the adapter index and lookup order.")
    List<String> l2Adapter;

    @Option(names = "--l2-store-policy", paramLabel = "<policy>", defaultValue = "default",
            description = "default (write through to every adapter, keep in L1), skip_l1 (drop from L1 once every adapter has it) or "
                    + "full_attention_only (sliding-window object groups stay in L1; --commit-policy writes their windows) "
                    + "(default: ${DEFAULT-VALUE}).")
    String l2StorePolicy;

    @Option(names = "--l2-prefetch-policy", paramLabel = "<policy>", defaultValue = "default",
            description = "default (objects loaded from L2 leave L1 with their last reader) or retain (they stay) (default: ${DEFAULT-VALUE}).")
    String l2PrefetchPolicy;

    @Option(names = "--l2-prefetch-max-in-flight", paramLabel = "<n>", defaultValue = "8",
            description = "LOOKUPs loading from L2 at once, 1..1024; more wait their turn (default: ${DEFAULT-VALUE}).")
    String l2PrefetchMaxInFlight;

    @Option(names = "--l2-prefetch-load-timeout", paramLabel = "<seconds>",
            description = "How long a LOOKUP waits for L2 before it is answered with its L1 hits, as LMCache's flag (default: 10).")
    String l2PrefetchLoadTimeout;

    @Option(names = "--l2-admission", paramLabel = "<policy>", defaultValue = "all",
            description = "Which committed objects the write-through sends to L2: all, or frequency:N (an object once its chunk was seen N "
                    + "times, STOREs and LOOKUPs counted in a count-min sketch, N in 2..15) (default: ${DEFAULT-VALUE}).")
    String l2Admission;

    @Option(names = "--l2-write-budget-bytes-per-second", paramLabel = "<bytes>", defaultValue = "0",
            description = "Each tenant's (cache salt's) L2 write budget in bytes per second (a burst of one second); objects past it are "
                    + "not written, counted; 0: no budget (default: ${DEFAULT-VALUE}).")
    String l2WriteBudgetBytesPerSecond;

    // --- HTTP and metrics --------------------------------------------------------------------
    @Option(names = "--http-host", paramLabel = "<address>", defaultValue = "0.0.0.0", description = "HTTP status/metrics address (default: ${DEFAULT-VALUE}).")
    String httpHost;

    @Option(names = "--http-port", paramLabel = "<port>", defaultValue = "8080",
            description = "HTTP port; 0 turns the HTTP frontend off (default: ${DEFAULT-VALUE}).")
    String httpPort;

    @Option(names = "--http-admin-token", paramLabel = "<token>",
            description = "Bearer token for the mutating endpoints (or env LMCACHE_HTTP_ADMIN_TOKEN). Without one they accept loopback clients only;"
                    + " /quota always needs the token.")
    String httpAdminToken;

    @Option(names = "--metrics-clear-salt-labels",
            description = "Label metrics with each cache_salt in clear, as LMCache does; by default a salt is labelled by a keyed digest"
                    + " (the salt is a tenant's secret and /metrics needs no token).")
    boolean metricsClearSaltLabels;

    @Option(names = "--prometheus-port", paramLabel = "<port>", description = "Also serve /metrics on this port (default: only on the HTTP port).")
    String prometheusPort;

    // --- the LMCache fleet (coordinator) ------------------------------------------------------
    @Option(names = "--coordinator-url", paramLabel = "<url>",
            description = "Join the LMCache coordinator at this base URL (or env LMCACHE_COORDINATOR_URL): register, heartbeat, take its"
                    + " cache control from its address without the admin token (default: no coordinator).")
    String coordinatorUrl;

    @Option(names = "--coordinator-advertise-ip", paramLabel = "<address>",
            description = "The address the coordinator dials this server's HTTP port at (or env LMCACHE_COORDINATOR_ADVERTISE_IP;"
                    + " default: the outbound address).")
    String coordinatorAdvertiseIp;

    @Option(names = "--coordinator-heartbeat-interval", paramLabel = "<seconds>",
            description = "Seconds between heartbeats and registration retries, > 0 (or env LMCACHE_COORDINATOR_HEARTBEAT_INTERVAL;"
                    + " default: 5).")
    String coordinatorHeartbeatInterval;

    @Option(names = "--coordinator-event-reporting",
            description = "Stream store, delete, access and config events to the coordinator's POST /events (or env"
                    + " LMCACHE_COORDINATOR_EVENT_REPORTING).")
    boolean coordinatorEventReporting;

    @Option(names = "--coordinator-event-flush-interval", paramLabel = "<seconds>",
            description = "Seconds events gather before a flush, > 0 (or env LMCACHE_COORDINATOR_EVENT_FLUSH_INTERVAL; default: 1).")
    String coordinatorEventFlushInterval;

    /** LMCache's hidden pre-v0.5.3 spelling of --coordinator-event-reporting, which released deployers still render. */
    @Option(names = "--coordinator-l2-event-reporting", hidden = true)
    boolean coordinatorL2EventReporting;

    /** LMCache's hidden pre-v0.5.3 spelling of --coordinator-event-flush-interval. */
    @Option(names = "--coordinator-l2-event-flush-interval", hidden = true)
    String coordinatorL2EventFlushInterval;

    // --- diagnostics (LMCache's lookup_hash.py@366ac586 and trace/lifecycle.py) ------------------------
    @Option(names = "--lookup-hash-log-dir", paramLabel = "<dir>",
            description = "Write one JSON line per LOOKUP (its chunk hashes, model, sizes) to rotating lookup_hashes_*.jsonl files here, for"
                    + " LMCache's cache simulator; written off the request path, lines dropped (counted) when the writer falls behind;"
                    + " salted LOOKUPs are not written (default: off).")
    String lookupHashLogDir;

    @Option(names = "--lookup-hash-log-rotation-interval", paramLabel = "<seconds>", defaultValue = "21600",
            description = "Start a new lookup-hash file once the current one is this old (default: ${DEFAULT-VALUE}).")
    String lookupHashLogRotationInterval;

    @Option(names = "--lookup-hash-log-rotation-max-size", paramLabel = "<bytes>", defaultValue = "104857600",
            description = "Start a new lookup-hash file once the current one is this large (default: ${DEFAULT-VALUE}).")
    String lookupHashLogRotationMaxSize;

    @Option(names = "--lookup-hash-log-max-files", paramLabel = "<n>", defaultValue = "100",
            description = "Lookup-hash files kept in the directory, earlier runs' included; the oldest are deleted (default: ${DEFAULT-VALUE}).")
    String lookupHashLogMaxFiles;

    @Option(names = "--trace-level", paramLabel = "<level>",
            description = "events: record the cache-event stream (the batches POST /events carries, with or without a coordinator) to"
                    + " --trace-output in LMCache's .lct format, for lmcache trace replay-events; storage is accepted and records nothing"
                    + " (default: off).")
    String traceLevel;

    @Option(names = "--trace-output", paramLabel = "<file>",
            description = "The trace file (replaced if it exists, never through a symlink) (default: $TMPDIR/lmcache-trace-PID-YYYYMMDD-HHMMSS.lct,"
                    + " logged at start).")
    String traceOutput;

    // --- operators (beyond LMCache's flags) ---------------------------------------------------
    @Option(names = "--shm-mode", paramLabel = "<mode>",
            description = "Permission bits of the L1 pool's file in /dev/shm, set after creation whatever the umask: 0600 (owner only) or"
                    + " 0660 so that an engine-driven worker running under another uid in the server's group can map it; modes that give"
                    + " others any access are refused (default: 0600).")
    String shmMode;

    @Option(names = "--shm-max-segments", paramLabel = "<n>",
            description = "Distinct CPU workers' /dev/shm segments mapped at once, server-wide; one REGISTER may name a quarter of them"
                    + " (default: a quarter of vm.max_map_count; at most half of it).")
    String shmMaxSegments;

    @Option(names = "--shm-max-mapped-gb", paramLabel = "<gb>", defaultValue = "16384",
            description = "GiB of CPU workers' /dev/shm segments mapped at once, server-wide; one REGISTER may map a quarter of them"
                    + " (default: ${DEFAULT-VALUE}).")
    String shmMaxMappedGb;

    @Option(names = "--cpu-copy-threads", paramLabel = "<n>", defaultValue = "auto",
            description = "Threads that copy a CPU worker's STORE or RETRIEVE between its /dev/shm tensors and the pool, its transfer"
                    + " thread included (1: that thread alone); auto: one per core, at most 16 per NUMA node (default: ${DEFAULT-VALUE}).")
    String cpuCopyThreads;

    @Option(names = "--metrics-sample-rate", paramLabel = "<ratio>", defaultValue = "0.01",
            description = "Fraction of chunks whose lifecycle (lifetime, idle time, reuse gaps) the histograms record, in (0, 1]; counters"
                    + " count every chunk (default: ${DEFAULT-VALUE}).")
    String metricsSampleRate;

    @Option(names = "--warmup-iterations", paramLabel = "<n>", defaultValue = "" + OperatorSettings.DEFAULT_WARMUP_ITERATIONS,
            description = "Rounds of the start-up JIT warm-up: STORE, LOOKUP, RETRIEVE on a scratch store and scratch memory while the"
                    + " pool is prepared, so the first requests run compiled code; 0 turns it off (default: ${DEFAULT-VALUE}).")
    String warmupIterations;

    @Option(names = "--warmup-budget-ms", paramLabel = "<ms>", defaultValue = "" + OperatorSettings.DEFAULT_WARMUP_BUDGET_MS,
            description = "The most the JIT warm-up may add to start-up, in ms; it stops there whether its rounds are done or not"
                    + " (default: ${DEFAULT-VALUE}).")
    String warmupBudgetMs;

    @Option(names = "--warmup-background-ms", paramLabel = "<ms>", defaultValue = "auto",
            description = "How long the start-up JIT warm-up's remaining rounds may go on after ready, in the background, until the"
                    + " first request reaches the server, in ms; 0 turns it off; auto: " + OperatorSettings.DEFAULT_WARMUP_BACKGROUND_MS
                    + " on hosts of " + Tuning.SPIN_MIN_CORES + " cores or more, 0 below (default: ${DEFAULT-VALUE}).")
    String warmupBackgroundMs;

    @Option(names = "--gpu-warmup-budget-ms", paramLabel = "<ms>", defaultValue = "" + OperatorSettings.DEFAULT_GPU_WARMUP_BUDGET_MS,
            description = "At each GPU's first REGISTER: how long the GPU warm-up runs STOREs (reading the worker's KV into scratch memory)"
                    + " and RETRIEVEs (into scratch device memory) through the CUDA copy path, beside the pin of the pool regions the first"
                    + " STOREs use, in ms; the REGISTER reply does not wait, and a worker's first transfer makes it yield; 0 turns it off"
                    + " (default: ${DEFAULT-VALUE}).")
    String gpuWarmupBudgetMs;

    @Option(names = "--gpu-warmup-register-wait-ms", paramLabel = "<ms>", defaultValue = "" + OperatorSettings.DEFAULT_GPU_WARMUP_REGISTER_WAIT_MS,
            description = "How long a GPU's first REGISTER reply may wait for that GPU's warm-up, in ms; 0: it never waits (the warm-up"
                    + " runs beside the reply and yields to the worker's first transfer; default: ${DEFAULT-VALUE}).")
    String gpuWarmupRegisterWaitMs;

    @Option(names = "--service-instance-id", paramLabel = "<id>",
            description = "The service_instance_id label on every metric and target_info (default: --instance-id).")
    String serviceInstanceId;

    // --- tests only ---------------------------------------------------------------------------
    @Option(names = "--test-hooks", hidden = true, description = "TESTS ONLY: enables POST /test/halt-loop.")
    boolean testHooks;

    @Option(names = "--test-liveness-floor-seconds", paramLabel = "<seconds>", hidden = true, defaultValue = "30",
            description = "TESTS ONLY: lowers the 30 s floor of the liveness timeouts.")
    String testLivenessFloorSeconds;
}
