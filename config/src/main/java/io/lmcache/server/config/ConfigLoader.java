package io.lmcache.server.config;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.dataformat.toml.TomlMapper;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetAddress;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import picocli.CommandLine;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.ParameterException;

/**
 * Turns the command line, the optional TOML config file and the environment into one validated
 * {@link ServerConfig}, or into an exit (help, version, or a one-line error with code 2).
 */
public final class ConfigLoader {
    public static final String ENV_CONFIG_FILE = "LMCACHE_MP_CONFIG";
    public static final String ENV_ADMIN_TOKEN = "LMCACHE_HTTP_ADMIN_TOKEN";
    public static final int EXIT_USAGE = 2;

    private static final long MIB = 1L << 20;
    private static final long GIB = 1L << 30;
    /** Pool memory is carved into 2 MiB pages; sizes are rounded to it. */
    public static final long PAGE_BYTES = 2 * MIB;
    private static final long MIN_POOL_BYTES = 4 * MIB;
    private static final long AUTO_REGION_MIN_BYTES = 64 * MIB;
    private static final long AUTO_REGION_MAX_BYTES = GIB;
    private static final long DEFAULT_DISCONNECT_GRACE_NS = TimeUnit.SECONDS.toNanos(60);
    /** The KV-event log's token ids, all records together (64 MiB of heap), and its record count by default. */
    static final long KV_EVENT_LOG_MAX_TOKENS = 16L << 20;
    static final int KV_EVENT_LOG_DEFAULT_RECORDS = 32768;
    /** A DNS name by its syntax (RFC 1123 labels), and what looks like a dotted IPv4 literal. */
    private static final Pattern HOST_NAME = Pattern.compile("(?i)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*\\.?");
    private static final Pattern NUMERIC = Pattern.compile("[0-9.]+");

    /** What {@link #load} decided. */
    public sealed interface Outcome {
        /** Start the server with this config; log the warnings first. */
        record Run(ServerConfig config, List<String> warnings) implements Outcome {}

        /** Print {@code text} (stdout when the code is 0, else stderr) and exit. */
        record Exit(int code, String text) implements Outcome {}
    }

    private ConfigLoader() {}

    public static Outcome load(String[] args, Map<String, String> env) {
        return load(args, env, MemoryLimits.probe());
    }

    /** As {@link #load(String[], Map)}, with the memory limits given (tests: {@link MemoryLimits#unlimited()} or fakes). */
    public static Outcome load(String[] args, Map<String, String> env, MemoryLimits memory) {
        List<String> warnings = new ArrayList<>();
        List<String> withoutEffect = new ArrayList<>();
        ServerOptions options = new ServerOptions();
        CommandLine commandLine = ServerOptions.withTopics(new CommandLine(options));
        commandLine.setUsageHelpWidth(100);
        LmcacheFlags.register(commandLine.getCommandSpec());

        String configFile = findConfigFile(args, env);
        List<String> fileL2Adapters = new ArrayList<>();
        if (configFile != null) {
            Map<String, Object> fileValues;
            Map<String, OptionSpec> byKey = optionsByKey(commandLine);
            Map<String, String> known = new LinkedHashMap<>();
            try {
                fileValues = readToml(Path.of(configFile), fileL2Adapters);
                for (Map.Entry<String, Object> entry : fileValues.entrySet()) {
                    String key = FILE_ALIASES.getOrDefault(entry.getKey().replace('-', '_').toLowerCase(Locale.ROOT),
                            entry.getKey().replace('-', '_').toLowerCase(Locale.ROOT));
                    Object value = entry.getValue();
                    // a flag of this server first (it may also be in LMCache's table), then LMCache's others
                    if (!byKey.containsKey(key) || key.equals("config_file")) {
                        if (!LmcacheFlags.fromFile(key, value, configFile, warnings, withoutEffect)) {
                            warnings.add("config file " + configFile + ": unknown key '" + entry.getKey() + "' ignored");
                        }
                    } else if (value instanceof Map<?, ?> || value instanceof List<?>) {
                        // LMCache only warns about a value it cannot use; so does this server
                        warnings.add("config file " + configFile + ": key '" + entry.getKey() + "' must be a plain value, not a table or"
                                + " array; ignored");
                    } else {
                        known.put(key, String.valueOf(value));
                    }
                }
            } catch (ConfigException e) {
                return usageError(e.getMessage());
            }
            commandLine.setDefaultValueProvider(argSpec -> {
                if (argSpec instanceof OptionSpec option) {
                    return known.get(keyOf(option));
                }
                return null;
            });
        }

        try {
            commandLine.parseArgs(args);
        } catch (ParameterException e) {
            return usageError(firstLine(e.getMessage()));
        }
        if (commandLine.isUsageHelpRequested()) {
            StringWriter out = new StringWriter();
            commandLine.usage(new PrintWriter(out));
            return new Outcome.Exit(0, out.toString());
        }
        if (commandLine.isVersionHelpRequested()) {
            return new Outcome.Exit(0, String.join(System.lineSeparator(), new Versions().getVersion()) + System.lineSeparator());
        }
        try {
            if (options.l2Adapter == null || options.l2Adapter.isEmpty()) {
                options.l2Adapter = fileL2Adapters; // flags win: the file's adapters only when none is given
            }
            LmcacheFlags.check(commandLine.getParseResult(), warnings, withoutEffect);
            ServerConfig config = validate(options, env, configFile, warnings, memory, withoutEffect);
            return new Outcome.Run(config, List.copyOf(warnings));
        } catch (ConfigException e) {
            return usageError(e.getMessage());
        }
    }

    private static Outcome usageError(String message) {
        return new Outcome.Exit(EXIT_USAGE, errorLine(message));
    }

    /** The one line a refused start prints on stderr (with exit code {@link #EXIT_USAGE}). */
    public static String errorLine(String message) {
        return "lmcache-server: error: " + message + " (see --help)" + System.lineSeparator();
    }

    private static String firstLine(String message) {
        int newline = message.indexOf('\n');
        return (newline < 0 ? message : message.substring(0, newline)).strip();
    }

    private static String findConfigFile(String[] args, Map<String, String> env) {
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--config-file") && i + 1 < args.length) {
                return args[i + 1];
            }
            if (args[i].startsWith("--config-file=")) {
                return args[i].substring("--config-file=".length());
            }
        }
        String fromEnv = env.get(ENV_CONFIG_FILE);
        return fromEnv == null || fromEnv.isBlank() ? null : fromEnv;
    }

    /** The file's values; {@code l2_adapter} (a JSON string, an inline table, or an array of either) goes to {@code l2Adapters}. */
    private static Map<String, Object> readToml(Path path, List<String> l2Adapters) throws ConfigException {
        if (Files.isDirectory(path)) {
            throw new ConfigException("--config-file", "is a directory, not a TOML file: " + path);
        }
        if (!Files.exists(path)) {
            throw new ConfigException("--config-file", "no such file: " + path);
        }
        if (!Files.isRegularFile(path)) {
            throw new ConfigException("--config-file", "not a regular file: " + path);
        }
        if (!Files.isReadable(path)) {
            throw new ConfigException("--config-file", "cannot read " + path + ": permission denied");
        }
        Map<String, Object> raw;
        try {
            raw = new TomlMapper().readValue(path.toFile(), new TypeReference<Map<String, Object>>() {});
        } catch (JacksonException e) {
            throw new ConfigException("--config-file", "not valid TOML (" + path + "): " + firstLine(e.getOriginalMessage()));
        } catch (IOException e) {
            throw new ConfigException("--config-file", "cannot read " + path + ": " + e.getMessage());
        }
        Map<String, Object> values = new LinkedHashMap<>();
        for (Map.Entry<String, Object> entry : raw.entrySet()) {
            if (entry.getKey().replace('-', '_').equals("l2_adapter")) {
                L2Flags.fromToml(entry.getValue(), l2Adapters);
            } else {
                values.put(entry.getKey(), entry.getValue());
            }
        }
        return values;
    }

    /** LMCache's hidden pre-v0.5.3 keys, which released deployers still render into config files: read as today's. */
    private static final Map<String, String> FILE_ALIASES = Map.of("coordinator_l2_event_reporting", "coordinator_event_reporting",
            "coordinator_l2_event_flush_interval", "coordinator_event_flush_interval");

    private static Map<String, OptionSpec> optionsByKey(CommandLine commandLine) {
        Map<String, OptionSpec> byKey = new LinkedHashMap<>();
        for (OptionSpec option : commandLine.getCommandSpec().options()) {
            if (!option.usageHelp() && !option.versionHelp() && !option.hidden()) {
                byKey.put(keyOf(option), option);
            }
        }
        return byKey;
    }

    private static String keyOf(OptionSpec option) {
        return option.longestName().replaceFirst("^--", "").replace('-', '_');
    }

    // --- validation -------------------------------------------------------------------------

    private static ServerConfig validate(ServerOptions o, Map<String, String> env, String configFile, List<String> warnings,
            MemoryLimits memory, List<String> withoutEffect) throws ConfigException {
        String host = hostOrAddress("--host", o.host, true);
        int port = intIn("--port", o.port, 1, 65535);
        long maxMessageBytes = intIn("--max-message-mb", o.maxMessageMb, 1, 1024) * MIB;
        int chunkSize = intIn("--chunk-size", o.chunkSize, 1, 1 << 20);
        if (o.separateObjectGroups && o.noSeparateObjectGroups) {
            throw new ConfigException("--no-separate-object-groups", "contradicts --separate-object-groups; give one of them");
        }
        if (o.isolatedIpc && o.noIsolatedIpc) {
            throw new ConfigException("--no-isolated-ipc", "contradicts --isolated-ipc; give one of them");
        }
        // LMCache's pool holds 256 events (event_pool.py@192b94f7 EVENT_POOL_SIZE): a larger batch is one batch anyway
        int layerwiseBatch = intIn("--layerwise-batch", o.layerwiseBatch, 0, 256);
        int maxWorkers = o.maxWorkers == null ? 1 : intIn("--max-workers", o.maxWorkers, 1, 1024);
        // 0: neither flag given, the lanes are chosen at start from whether a GPU serves (ServerConfig.transferLanes)
        int maxGpuWorkers = o.maxGpuWorkers != null ? intIn("--max-gpu-workers", o.maxGpuWorkers, 1, 1024) : o.maxWorkers != null ? maxWorkers : 0;
        int maxCpuWorkers = o.maxCpuWorkers == null ? maxWorkers : intIn("--max-cpu-workers", o.maxCpuWorkers, 1, 1024);
        TransferMode transferMode = choice("--supported-transfer-mode", o.supportedTransferMode, TransferMode::parse);
        DeviceMode device = choice("--device", o.device, DeviceMode::parse);
        EvictionPolicyName evictionPolicy = choice("--eviction-policy", o.evictionPolicy.strip(), EvictionPolicyName::parse);
        HashAlgorithm hashAlgorithm = HashAlgorithm.validate(o.hashAlgorithm, env);

        L1Sizes l1 = validateL1Pool(o, memory);
        long writeTtlNs = secondsAtLeast("--l1-write-ttl-seconds", o.l1WriteTtlSeconds, 1);
        long readTtlNs = secondsAtLeast("--l1-read-ttl-seconds", o.l1ReadTtlSeconds, 1);

        double watermark = fraction("--eviction-trigger-watermark", o.evictionTriggerWatermark);
        double ratio = fraction("--eviction-ratio", o.evictionRatio);

        WorkerTimeouts timeouts = validateWorkerTimeouts(o, warnings);
        Http http = validateHttp(o, env, port);
        String instanceId = o.instanceId == null ? UUID.randomUUID().toString() : nonBlank("--instance-id", o.instanceId);
        L2Settings l2 = L2Flags.validate(o.l2Adapter, o.l2StorePolicy, o.l2PrefetchPolicy, intIn("--l2-prefetch-max-in-flight",
                o.l2PrefetchMaxInFlight, 1, 1024), L2Flags.loadTimeoutNs(o.l2PrefetchLoadTimeout),
                L2Flags.admission(o.l2Admission, o.l2WriteBudgetBytesPerSecond));
        OperatorSettings operator = OperatorSettings.validate(o,
                o.serviceInstanceId == null ? instanceId : o.serviceInstanceId, warnings);

        ConnectionSettings connections = ConnectionSettings.of(o.maxConnections == null ? null : intIn("--max-connections", o.maxConnections, 1,
                1 << 24), intIn("--connection-stall-timeout-seconds", o.connectionStallTimeoutSeconds, 1, 3600), ConnectionSettings.readOpenFileLimit(),
                warnings);
        int kvEventLogSize = kvEventLogSize(o.kvEventLogSize, chunkSize);
        CommitSettings commit = CommitSettings.validate(o.commitPolicy, o.commitAnchor, o.commitBoundaryTokens);
        boolean separateObjectGroups = !o.noSeparateObjectGroups;
        TenantSettings tenants = new TenantSettings(fraction("--tenant-read-lock-share", o.tenantReadLockShare), o.metricsClearSaltLabels);
        FleetSettings fleet = validateFleet(o, env);
        if (fleet.enabled() && http.port() == 0) {
            throw new ConfigException("--coordinator-url", "needs the HTTP frontend (--http-port other than 0): the coordinator calls it");
        }
        return new ServerConfig(host, port, maxMessageBytes, chunkSize, separateObjectGroups, maxWorkers, maxGpuWorkers, maxCpuWorkers,
                transferMode, l1.shmName(), o.shmAllowAnyOwner, l1.sizeBytes(), l1.regionBytes(), writeTtlNs, readTtlNs, evictionPolicy,
                watermark, ratio, timeouts.reapNs(), timeouts.graceNs(), timeouts.disconnectNs(), http.host(), http.port(), http.adminToken(),
                http.prometheusPort(), instanceId, hashAlgorithm, device, withoutEffect,
                configFile == null ? "" : configFile, o.testHooks, l2, operator, connections, kvEventLogSize, commit,
                tenants, o.isolatedIpc, layerwiseBatch, fleet, DiagnosticsSettings.validate(o, warnings), Tuning.fromSystemProperties());
    }

    /** {@code --coordinator-*}, each flag before its LMCACHE_COORDINATOR_* variable (as LMCache: the flag wins). */
    private static FleetSettings validateFleet(ServerOptions o, Map<String, String> env) throws ConfigException {
        String url = firstOf(o.coordinatorUrl, env.get("LMCACHE_COORDINATOR_URL"), "").strip();
        if (!url.isEmpty()) {
            URI uri;
            try {
                uri = new URI(url);
            } catch (URISyntaxException e) {
                throw new ConfigException("--coordinator-url", "must be an http:// or https:// URL, got '" + url + "'");
            }
            if (uri.getScheme() == null || !uri.getScheme().matches("(?i)https?") || uri.getHost() == null || uri.getRawQuery() != null
                    || uri.getRawUserInfo() != null) {
                throw new ConfigException("--coordinator-url", "must be an http:// or https:// URL with a host, no user and no query, got '"
                        + url + "'");
            }
            url = url.replaceAll("/+$", "");
        }
        String advertise = firstOf(o.coordinatorAdvertiseIp, env.get("LMCACHE_COORDINATOR_ADVERTISE_IP"), "").strip();
        if (!advertise.isEmpty()) {
            advertise = hostOrAddress("--coordinator-advertise-ip", advertise, false);
        }
        long heartbeatNs = positiveSeconds("--coordinator-heartbeat-interval", firstOf(o.coordinatorHeartbeatInterval,
                env.get("LMCACHE_COORDINATOR_HEARTBEAT_INTERVAL"), "" + FleetSettings.DEFAULT_HEARTBEAT_SECONDS));
        boolean events = o.coordinatorEventReporting || o.coordinatorL2EventReporting
                || isTrue(env.get("LMCACHE_COORDINATOR_EVENT_REPORTING"));
        long flushNs = positiveSeconds("--coordinator-event-flush-interval", firstOf(o.coordinatorEventFlushInterval,
                firstOf(o.coordinatorL2EventFlushInterval, env.get("LMCACHE_COORDINATOR_EVENT_FLUSH_INTERVAL"), null),
                "" + FleetSettings.DEFAULT_FLUSH_SECONDS));
        return new FleetSettings(url, advertise, heartbeatNs, events, flushNs);
    }

    private static String firstOf(String flag, String env, String fallback) {
        return flag != null ? flag : env != null ? env : fallback;
    }

    private static boolean isTrue(String env) {
        return env != null && env.strip().matches("(?i)1|true|yes|on");
    }

    /** A number of seconds {@code > 0} (LMCache refuses 0 and below) and at most one day. */
    private static long positiveSeconds(String flag, String text) throws ConfigException {
        double value = finite(flag, text);
        if (!(value > 0) || value > 24 * 3600.0) {
            throw new ConfigException(flag, "must be a number of seconds > 0 and at most one day, got " + text.strip());
        }
        return Math.max(1, toNanos(value));
    }

    /** The L1 pool's segment name, size and region size. */
    private record L1Sizes(String shmName, long sizeBytes, long regionBytes) {}

    /** The reaper's timeouts: a worker's silence, a registration's grace, a disconnected worker's grace (0 = off). */
    private record WorkerTimeouts(long reapNs, long graceNs, long disconnectNs) {}

    /** The HTTP frontend's address, admin token and the Prometheus port (0 = on the HTTP port). */
    private record Http(String host, int port, String adminToken, int prometheusPort) {}

    private static L1Sizes validateL1Pool(ServerOptions o, MemoryLimits memory) throws ConfigException {
        String shmName = o.shmName == null ? "lmcache_l1_pool_" + ProcessHandle.current().pid() : o.shmName.strip();
        if (shmName.startsWith("/")) {
            shmName = shmName.substring(1);
        }
        if (!shmName.matches("[A-Za-z0-9._-]{0,200}")) {
            throw new ConfigException("--shm-name", "must be letters, digits, '.', '_' or '-' (a name in /dev/shm), got '" + o.shmName + "'");
        }

        if (o.l1SizeGb == null) {
            throw new ConfigException("--l1-size-gb", "is required: the size of the host-memory pool in GiB, e.g. --l1-size-gb 20");
        }
        double l1SizeGb = finite("--l1-size-gb", o.l1SizeGb);
        if (!(l1SizeGb > 0) || l1SizeGb > 64 * 1024) {
            throw new ConfigException("--l1-size-gb", "must be > 0 and at most 65536, got " + o.l1SizeGb);
        }
        long l1SizeBytes = (long) (l1SizeGb * GIB) / PAGE_BYTES * PAGE_BYTES;
        if (l1SizeBytes < MIN_POOL_BYTES) {
            throw new ConfigException("--l1-size-gb", "must be at least 4 MiB (0.004), got " + o.l1SizeGb);
        }
        if (l1SizeBytes > memory.poolCeilingBytes()) {
            throw new ConfigException("--l1-size-gb", o.l1SizeGb.strip() + " GiB cannot fit: " + memory.describeLimit() + " is "
                    + gib(memory.limitBytes()) + " GiB, and 1 GiB or 5% of it (the larger) stays for the server and the system, so the"
                    + " pool can be at most " + gib(memory.poolCeilingBytes()) + " GiB");
        }
        long regionBytes;
        if (o.l1RegionSizeMb == null) {
            long target = Math.clamp(l1SizeBytes / 16, AUTO_REGION_MIN_BYTES, AUTO_REGION_MAX_BYTES);
            regionBytes = Math.min(l1SizeBytes, target / PAGE_BYTES * PAGE_BYTES);
        } else {
            long regionMb = intIn("--l1-region-size-mb", o.l1RegionSizeMb, 2, 1 << 20);
            if (regionMb % 2 != 0) {
                throw new ConfigException("--l1-region-size-mb", "must be a multiple of 2 (the page size), got " + regionMb);
            }
            regionBytes = regionMb * MIB;
            if (regionBytes > l1SizeBytes) {
                throw new ConfigException("--l1-region-size-mb", "must not exceed the pool (" + (l1SizeBytes / MIB) + " MiB), got " + regionMb);
            }
        }
        return new L1Sizes(shmName, l1SizeBytes, regionBytes);
    }

    /**
     * {@code --kv-event-log-size}: the log keeps a chunk of token ids per record, allocated at start, so records times chunk size is
     * bounded ({@link #KV_EVENT_LOG_MAX_TOKENS}): by default the record count shrinks to fit (a {@code --chunk-size 8192} start
     * failed with "Java heap space"); a size given that does not fit is refused in one line.
     */
    static int kvEventLogSize(String given, int chunkSize) throws ConfigException {
        int fitting = (int) Math.min(1 << 20, KV_EVENT_LOG_MAX_TOKENS / chunkSize);
        if (given == null) {
            return Math.min(KV_EVENT_LOG_DEFAULT_RECORDS, fitting);
        }
        int records = intIn("--kv-event-log-size", given, 0, 1 << 20);
        if (records > fitting) {
            throw new ConfigException("--kv-event-log-size", "keeps " + records + " records of " + chunkSize + " token ids (--chunk-size), "
                    + ((long) records * chunkSize * Integer.BYTES >> 20) + " MiB of heap; at most " + fitting + " fit the log's "
                    + (KV_EVENT_LOG_MAX_TOKENS * Integer.BYTES >> 20) + " MiB");
        }
        return records;
    }

    private static WorkerTimeouts validateWorkerTimeouts(ServerOptions o, List<String> warnings) throws ConfigException {
        double floorSeconds = finite("--test-liveness-floor-seconds", o.testLivenessFloorSeconds);
        if (!(floorSeconds > 0) || floorSeconds > 30) {
            throw new ConfigException("--test-liveness-floor-seconds", "must be in (0, 30], got " + o.testLivenessFloorSeconds);
        }
        long floorNs = toNanos(floorSeconds);
        long reapNs = secondsAtLeast("--worker-reap-timeout-seconds", o.workerReapTimeoutSeconds, 0);
        if (reapNs != 0 && reapNs < floorNs) {
            throw new ConfigException("--worker-reap-timeout-seconds",
                    "must be 0 (disabled) or at least " + fmt(floorSeconds) + ", got " + o.workerReapTimeoutSeconds);
        }
        long graceNs = secondsAtLeast("--worker-registration-grace-seconds", o.workerRegistrationGraceSeconds, 0);
        if (graceNs < reapNs) {
            throw new ConfigException("--worker-registration-grace-seconds", "must be at least --worker-reap-timeout-seconds ("
                    + o.workerReapTimeoutSeconds + "), got " + o.workerRegistrationGraceSeconds);
        }
        long disconnectNs;
        if (o.workerDisconnectGraceSeconds == null) {
            disconnectNs = reapNs == 0 ? 0 : Math.min(DEFAULT_DISCONNECT_GRACE_NS, reapNs);
        } else {
            disconnectNs = secondsAtLeast("--worker-disconnect-grace-seconds", o.workerDisconnectGraceSeconds, 0);
            if (disconnectNs != 0 && (disconnectNs < floorNs || disconnectNs > reapNs)) {
                throw new ConfigException("--worker-disconnect-grace-seconds", "must be 0 (disabled) or between " + fmt(floorSeconds)
                        + " and --worker-reap-timeout-seconds (" + o.workerReapTimeoutSeconds + "), got " + o.workerDisconnectGraceSeconds);
            }
        }
        if (reapNs != 0 && reapNs < 3 * ServerConfig.CLIENT_HEARTBEAT_NS) {
            warnings.add("--worker-reap-timeout-seconds " + o.workerReapTimeoutSeconds
                    + " is under 3 x the client's 10 s heartbeat: a live worker that misses two pings can be reaped");
        }
        return new WorkerTimeouts(reapNs, graceNs, disconnectNs);
    }

    private static Http validateHttp(ServerOptions o, Map<String, String> env, int port) throws ConfigException {
        String httpHost = hostOrAddress("--http-host", o.httpHost, false);
        int httpPort = intIn("--http-port", o.httpPort, 0, 65535);
        int prometheusPort = o.prometheusPort == null ? 0 : intIn("--prometheus-port", o.prometheusPort, 1, 65535);
        String token = o.httpAdminToken != null ? o.httpAdminToken : env.getOrDefault(ENV_ADMIN_TOKEN, "");
        token = token.strip();
        if (httpPort != 0 && httpPort == port) {
            throw new ConfigException("--http-port", "must differ from --port (" + port + ")");
        }
        if (prometheusPort != 0 && (prometheusPort == port || prometheusPort == httpPort)) {
            throw new ConfigException("--prometheus-port", "must differ from --port and --http-port, got " + prometheusPort);
        }
        return new Http(httpHost, httpPort, token, prometheusPort);
    }

    private interface Parser<T> {
        T parse(String text);
    }

    private static <T> T choice(String flag, String text, Parser<T> parser) throws ConfigException {
        try {
            return parser.parse(text.strip());
        } catch (IllegalArgumentException e) {
            throw new ConfigException(flag, e.getMessage() + ", got '" + text + "'");
        }
    }

    /**
     * An IP literal (IPv6 with or without brackets) or a host name by its syntax; {@code *} (every
     * interface) where ZeroMQ takes it. Checked here, so {@code 999.1.1.1} is a usage error and not
     * a DNS look-up and a failed bind; a well-formed name that does not resolve fails at the bind.
     */
    private static String hostOrAddress(String flag, String text, boolean wildcard) throws ConfigException {
        String host = nonBlank(flag, text);
        if (wildcard && host.equals("*")) {
            return host;
        }
        String bare = host.startsWith("[") && host.endsWith("]") ? host.substring(1, host.length() - 1) : host;
        boolean literal = bare.contains(":") || NUMERIC.matcher(bare).matches();
        if (literal) {
            try {
                InetAddress.ofLiteral(bare);
            } catch (IllegalArgumentException e) {
                throw new ConfigException(flag, "not a valid IP address: '" + host + "'");
            }
        } else if (bare.length() > 253 || !HOST_NAME.matcher(bare).matches()) {
            throw new ConfigException(flag, "not a valid host name or IP address: '" + host + "'");
        }
        return host;
    }

    private static String nonBlank(String flag, String text) throws ConfigException {
        if (text == null || text.isBlank()) {
            throw new ConfigException(flag, "must not be empty");
        }
        return text.strip();
    }

    static int intIn(String flag, String text, int min, int max) throws ConfigException {
        long value;
        try {
            value = Long.parseLong(text.strip());
        } catch (NumberFormatException e) {
            throw new ConfigException(flag, "must be an integer in " + min + ".." + max + ", got '" + text + "'");
        }
        if (value < min || value > max) {
            throw new ConfigException(flag, "must be in " + min + ".." + max + ", got " + value);
        }
        return (int) value;
    }

    private static double finite(String flag, String text) throws ConfigException {
        double value;
        try {
            value = Double.parseDouble(text.strip());
        } catch (NumberFormatException e) {
            throw new ConfigException(flag, "must be a number, got '" + text + "'");
        }
        if (!Double.isFinite(value)) {
            throw new ConfigException(flag, "must be a finite number, got '" + text + "'");
        }
        return value;
    }

    private static double fraction(String flag, String text) throws ConfigException {
        double value = finite(flag, text);
        if (!(value > 0) || value > 1) {
            throw new ConfigException(flag, "must be in (0, 1], got " + text.strip());
        }
        return value;
    }

    private static long secondsAtLeast(String flag, String text, double minSeconds) throws ConfigException {
        double value = finite(flag, text);
        if (value < minSeconds || value > 365 * 24 * 3600.0) {
            throw new ConfigException(flag, "must be a number of seconds, at least " + fmt(minSeconds) + " and at most one year, got " + text.strip());
        }
        return toNanos(value);
    }

    private static long toNanos(double seconds) {
        return Math.round(seconds * 1e9);
    }

    private static String gib(long bytes) {
        return String.format(Locale.ROOT, "%.1f", bytes / (double) GIB);
    }

    private static String fmt(double seconds) {
        return seconds == Math.rint(seconds) ? Long.toString((long) seconds) : Double.toString(seconds);
    }

    /** The server's command line as picocli builds it, LMCache's compatibility flags included (hidden): for shell completion. */
    public static CommandLine commandLine() {
        CommandLine commandLine = ServerOptions.withTopics(new CommandLine(new ServerOptions()));
        LmcacheFlags.register(commandLine.getCommandSpec());
        return commandLine;
    }

    /** The flag names, for tests and docs. */
    public static Set<String> flagNames() {
        Set<String> names = new HashSet<>();
        for (OptionSpec option : new CommandLine(new ServerOptions()).getCommandSpec().options()) {
            if (!option.hidden()) {
                names.add(option.longestName());
            }
        }
        return names;
    }
}
