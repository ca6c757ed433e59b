package io.lmcache.server.config;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The validated, immutable configuration of one server process. Built only by {@link ConfigLoader}
 * (command line, config file, environment), so every instance satisfies the rules there.
 *
 * @param separateObjectGroups hybrid models: one object group per (aux tag, recurrent, window), not one for all groups
 * @param maxMessageBytes the largest ZeroMQ frame the ROUTER accepts (JeroMQ refuses a longer declared
 *     length before allocating it)
 * @param shmName name of the L1 pool's segment in /dev/shm; empty = anonymous memory (no
 *     engine-driven shared-memory path)
 * @param shmAllowAnyOwner map CPU workers' segments of any owner, not only the server's own user's
 * @param workerDisconnectGraceNs 0 = disconnect reclaim off
 * @param httpPort 0 = HTTP frontend off
 * @param maxGpuWorkers the transfer lanes ({@code --max-gpu-workers}); 0 = chosen at start ({@link #transferLanes})
 * @param prometheusPort 0 = metrics only on the HTTP port
 * @param httpAdminToken empty = no token (admin endpoints then accept loopback clients only)
 * @param testHooks tests only: endpoints that break the server on purpose
 * @param hashAlgorithm the chunk-hash chain every chunk key is hashed with, shared with LMCache servers
 * @param lmcacheFlagsWithoutEffect LMCache's flags given that are accepted and change nothing here (LmcacheFlags), by name
 * @param l2 the L2 tier (no adapters: L1 only)
 * @param operator the pool file's mode, metric sampling and instance label
 * @param connections the cap on ZeroMQ connections and the stall timeout
 * @param kvEventLogSize records the KV-event log keeps; 0 = the channel is off
 * @param commit the window commit at END_SESSION ({@code --commit-policy}, {@code --commit-anchor}, {@code --commit-boundary-tokens})
 * @param tenants the tenant boundary: the read-lock share and how metrics label a cache salt
 * @param isolatedIpc {@code --isolated-ipc}: workers are expected to send timeline-semaphore events (81 bytes); every handle is
 *     still read for what it is, and a request of the other kind is served and warned about
 * @param layerwiseBatch {@code --layerwise-batch}: 0 = per-chunk RETRIEVE (the default); N > 0 = LMCache's layer-wise mode, RETRIEVE_LAYERWISE
 *     answered with one frame per N layers and plain RETRIEVE refused ({@code lmcache_driven_transfer_layerwise.py@1565d9a3})
 * @param fleet membership in an LMCache fleet ({@code --coordinator-*}); {@link FleetSettings#OFF} without a coordinator
 * @param diagnostics the lookup-hash log and the trace recording ({@code --lookup-hash-log-*}, {@code --trace-*})
 * @param tuning the {@code -Dlmcache.*} performance knobs (not flags: {@code /config} shows them apart)
 */
public record ServerConfig(
        String host,
        int port,
        long maxMessageBytes,
        int chunkSize,
        boolean separateObjectGroups,
        int maxWorkers,
        int maxGpuWorkers,
        int maxCpuWorkers,
        TransferMode supportedTransferMode,
        String shmName,
        boolean shmAllowAnyOwner,
        long l1SizeBytes,
        long l1RegionSizeBytes,
        long l1WriteTtlNs,
        long l1ReadTtlNs,
        EvictionPolicyName evictionPolicy,
        double evictionTriggerWatermark,
        double evictionRatio,
        long workerReapTimeoutNs,
        long workerRegistrationGraceNs,
        long workerDisconnectGraceNs,
        String httpHost,
        int httpPort,
        String httpAdminToken,
        int prometheusPort,
        String instanceId,
        HashAlgorithm hashAlgorithm,
        DeviceMode device,
        List<String> lmcacheFlagsWithoutEffect,
        String configFile,
        boolean testHooks,
        L2Settings l2,
        OperatorSettings operator,
        ConnectionSettings connections,
        int kvEventLogSize,
        CommitSettings commit,
        TenantSettings tenants,
        boolean isolatedIpc,
        int layerwiseBatch,
        FleetSettings fleet,
        DiagnosticsSettings diagnostics,
        Tuning tuning) {

    public ServerConfig {
        lmcacheFlagsWithoutEffect = List.copyOf(lmcacheFlagsWithoutEffect);
    }

    /** The client's heartbeat period; the reap timeout should be at least three of these. */
    public static final long CLIENT_HEARTBEAT_NS = TimeUnit.SECONDS.toNanos(10);

    public String zmqEndpoint() {
        return "tcp://" + host + ":" + port;
    }

    public boolean hasAdminToken() {
        return !httpAdminToken.isEmpty();
    }

    /** Flag name → effective value, for `/config` and the start-up log; the admin token is redacted. */
    public Map<String, Object> describe() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("host", host);
        out.put("port", port);
        out.put("max_message_mb", maxMessageBytes >> 20);
        out.put("chunk_size", chunkSize);
        out.put("separate_object_groups", separateObjectGroups);
        out.put("isolated_ipc", isolatedIpc);
        out.put("layerwise_batch", layerwiseBatch);
        out.put("max_workers", maxWorkers);
        out.put("max_gpu_workers", maxGpuWorkers == 0 ? "auto" : maxGpuWorkers);
        out.put("max_cpu_workers", maxCpuWorkers);
        out.put("supported_transfer_mode", supportedTransferMode.flagValue());
        out.put("shm_name", shmName);
        out.put("shm_allow_any_owner", shmAllowAnyOwner);
        out.put("l1_size_gb", l1SizeBytes / (double) (1L << 30));
        out.put("l1_region_size_mb", l1RegionSizeBytes >> 20);
        out.put("l1_write_ttl_seconds", seconds(l1WriteTtlNs));
        out.put("l1_read_ttl_seconds", seconds(l1ReadTtlNs));
        out.put("eviction_policy", evictionPolicy.flagValue());
        out.put("eviction_trigger_watermark", evictionTriggerWatermark);
        out.put("eviction_ratio", evictionRatio);
        out.put("worker_reap_timeout_seconds", seconds(workerReapTimeoutNs));
        out.put("worker_registration_grace_seconds", seconds(workerRegistrationGraceNs));
        out.put("worker_disconnect_grace_seconds", seconds(workerDisconnectGraceNs));
        out.put("http_host", httpHost);
        out.put("http_port", httpPort);
        out.put("http_admin_token", hasAdminToken() ? "<set>" : "");
        out.put("prometheus_port", prometheusPort);
        out.put("instance_id", instanceId);
        out.put("hash_algorithm", hashAlgorithm.flagValue());
        out.put("device", device.flagValue());
        out.put("lmcache_flags_without_effect", lmcacheFlagsWithoutEffect);
        out.put("config_file", configFile);
        out.put("l2_adapter", l2.adapterJson());
        out.put("l2_store_policy", l2.storePolicy());
        out.put("l2_prefetch_policy", l2.retainPrefetched() ? "retain" : "default");
        out.put("l2_prefetch_max_in_flight", l2.prefetchMaxInFlight());
        out.put("l2_prefetch_load_timeout", seconds(l2.prefetchLoadTimeoutNs()));
        out.put("l2_admission", l2.admission().flagValue());
        out.put("l2_write_budget_bytes_per_second", l2.admission().writeBudgetBytesPerSecond());
        out.put("shm_mode", operator.shmModeText());
        out.put("numa_placement", operator.numaPlacement() ? "auto" : "off");
        out.put("shm_max_segments", operator.shmMaxSegments());
        out.put("shm_max_mapped_gb", operator.shmMaxMappedBytes() >> 30);
        out.put("cpu_copy_threads", operator.cpuCopyThreads() == 0 ? "auto" : operator.cpuCopyThreads());
        out.put("metrics_sample_rate", operator.metricsSampleRate());
        out.put("service_instance_id", operator.serviceInstanceId());
        out.put("warmup_iterations", operator.warmupIterations());
        out.put("warmup_budget_ms", TimeUnit.NANOSECONDS.toMillis(operator.warmupBudgetNs()));
        out.put("gpu_warmup_budget_ms", TimeUnit.NANOSECONDS.toMillis(operator.gpuWarmupBudgetNs()));
        out.put("gpu_warmup_register_wait_ms", TimeUnit.NANOSECONDS.toMillis(operator.gpuWarmupRegisterWaitNs()));
        out.put("warmup_background_ms", TimeUnit.NANOSECONDS.toMillis(operator.warmupBackgroundNs()));
        out.put("max_connections", connections.maxConnections());
        out.put("connection_stall_timeout_seconds", seconds(connections.stallTimeoutNs()));
        out.put("kv_event_log_size", kvEventLogSize);
        out.put("commit_policy", commit.policy().flagValue());
        out.put("commit_anchor", commit.anchor().flagValue());
        out.put("commit_boundary_tokens", commit.boundaryTokens());
        out.put("tenant_read_lock_share", tenants.readLockShare());
        out.put("metrics_clear_salt_labels", tenants.metricsClearSaltLabels());
        out.put("coordinator_url", fleet.coordinatorUrl());
        out.put("coordinator_advertise_ip", fleet.advertiseIp());
        out.put("coordinator_heartbeat_interval", fleet.heartbeatIntervalNs() / 1e9);
        out.put("coordinator_event_reporting", fleet.eventReporting());
        out.put("coordinator_event_flush_interval", fleet.eventFlushIntervalNs() / 1e9);
        out.put("lookup_hash_log_dir", diagnostics.lookupHashLogDir());
        out.put("lookup_hash_log_rotation_interval", diagnostics.lookupHashRotationSeconds());
        out.put("lookup_hash_log_rotation_max_size", diagnostics.lookupHashRotationMaxBytes());
        out.put("lookup_hash_log_max_files", diagnostics.lookupHashMaxFiles());
        out.put("trace_level", diagnostics.traceLevel().flagValue());
        out.put("trace_output", diagnostics.traceOutput());
        return out;
    }

    private static double seconds(long ns) {
        return ns / 1e9;
    }

    /** Transfer lanes when neither {@code --max-gpu-workers} nor {@code --max-workers} is given: as LMCache, where a GPU serves. */
    static final int LMCACHE_TRANSFER_LANES = 1;
    /** Without a GPU, one lane per this many cores. */
    static final int CORES_PER_HOST_LANE = 4;
    /** Without a GPU, at most this many lanes by default. */
    static final int MAX_DEFAULT_HOST_LANES = 8;

    /**
     * The transfer lanes a server starts with: {@code --max-gpu-workers} (or {@code --max-workers}) where given; else LMCache's
     * one where a GPU serves, and without a GPU (every worker copies through shared memory with the server's copy threads) one
     * per {@value #CORES_PER_HOST_LANE} cores, up to {@value #MAX_DEFAULT_HOST_LANES}, so that several CPU workers' copies
     * overlap instead of taking turns (bench/RESULTS.md#cpu-copy-path: four lanes against one on 16 cores).
     */
    public Lanes transferLanes(boolean gpu, int cores) {
        if (maxGpuWorkers > 0) {
            return new Lanes(maxGpuWorkers, "as given");
        }
        if (gpu) {
            return new Lanes(LMCACHE_TRANSFER_LANES, "LMCache's default; --max-gpu-workers sets it");
        }
        return new Lanes(Math.max(1, Math.min(MAX_DEFAULT_HOST_LANES, cores / CORES_PER_HOST_LANE)),
                "no GPU: one per " + CORES_PER_HOST_LANE + " cores, at most " + MAX_DEFAULT_HOST_LANES + "; --max-gpu-workers sets it");
    }

    /** The transfer lanes a server starts with, and why that many (its start-up line says both). */
    public record Lanes(int count, String why) {}

    /**
     * How long the scratch server's idle transfer threads spin (none where the server's do not): short, so the warm-up's
     * requests find them both spinning and parked, as a worker's do. With no spin the first real request on a spinning server
     * found the lanes' wait compiled without it and threw that code away (bench/journal/2026-12-07-request-timelines.md).
     */
    static final long WARMUP_SPIN_NS = 50_000;

    /**
     * The warm-up's scratch server's configuration (warmup/ScratchServer): this one but for what would reach beyond the
     * scratch memory or take threads and memory a warm-up has no use for: the LMCache-driven mode only (its worker's), one
     * handler thread per lane spinning at most {@link #WARMUP_SPIN_NS}, the host copies on the transfer thread, no layer-wise mode (the warm-up sends
     * plain RETRIEVEs), no L2, no window commit, no fleet, no diagnostics, no test hooks, a KV-event log of
     * {@code kvEventLogCapacity}. Kept beside the components, so a new setting is switched off here, where it is added.
     */
    public ServerConfig forWarmup(int kvEventLogCapacity) {
        ServerConfig c = this;
        OperatorSettings o = c.operator();
        OperatorSettings operator = new OperatorSettings(o.shmMode(), o.shmMaxSegments(), o.shmMaxMappedBytes(), o.metricsSampleRate(),
                o.serviceInstanceId(), false, 0, 0, 0, 0, 0, 1);
        L2Settings l2 = new L2Settings(List.of(), List.of(), false, false, c.l2().prefetchMaxInFlight(), false, c.l2().prefetchLoadTimeoutNs(),
                c.l2().admission());
        Tuning t = c.tuning();
        Tuning tuning = new Tuning(t.copyKernelBlocks(), t.stagingHalfBytes(), t.firstBatchBytes(), t.dmaHeadBytes(), t.storeDmaHeadMinPieceBytes(),
                t.retrieveDmaHeadMinPieceBytes(), t.batchGrowth(), t.warmContext(), t.queryWorkerEvent(), t.hostFnWake(),
                t.openEventAheadChunks(), t.stageInPoolOrder(), Math.min(t.transferSpinNs(), WARMUP_SPIN_NS), t.hostRunBytes(), t.nativeHostCopy(),
                t.prepareThreads(), t.stackLimitBytes());
        return new ServerConfig(c.host(), c.port(), c.maxMessageBytes(), c.chunkSize(), c.separateObjectGroups(), 1, 1, 1,
                TransferMode.LMCACHE_DRIVEN, "", false, c.l1SizeBytes(), c.l1RegionSizeBytes(), c.l1WriteTtlNs(), c.l1ReadTtlNs(),
                c.evictionPolicy(), c.evictionTriggerWatermark(), c.evictionRatio(), c.workerReapTimeoutNs(), c.workerRegistrationGraceNs(),
                c.workerDisconnectGraceNs(), c.httpHost(), c.httpPort(), "", c.prometheusPort(), c.instanceId(), c.hashAlgorithm(),
                DeviceMode.HOST, List.of(), c.configFile(), false, l2, operator, c.connections(), kvEventLogCapacity, CommitSettings.NEVER,
                c.tenants(), c.isolatedIpc(), 0, FleetSettings.OFF, DiagnosticsSettings.OFF,
                tuning);
    }
}
