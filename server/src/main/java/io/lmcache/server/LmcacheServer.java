package io.lmcache.server;

import io.lmcache.server.agent.AgentErrors;
import io.lmcache.server.agent.AgentRunner;
import io.lmcache.server.agent.CudaEventsAgent;
import io.lmcache.server.agent.Housekeeping;
import io.lmcache.server.config.DeviceMode;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.cuda.CudaException;
import io.lmcache.server.cuda.GpuBackend;
import io.lmcache.server.config.Versions;
import io.lmcache.server.http.AdminGuard;
import io.lmcache.server.http.CoreRoutes;
import io.lmcache.server.http.HttpApi;
import io.lmcache.server.http.ServerRoutes;
import io.lmcache.server.liveness.InstanceLivenessTarget;
import io.lmcache.server.liveness.Liveness;
import io.lmcache.server.liveness.PeerConnections;
import io.lmcache.server.liveness.Reaper;
import io.lmcache.server.liveness.ReleaseMetrics;
import io.lmcache.server.liveness.ReleaseThread;
import io.lmcache.server.loop.Dispatcher;
import io.lmcache.server.loop.ReplyQueue;
import io.lmcache.server.loop.RequestLoop;
import io.lmcache.server.metrics.ActivityLog;
import io.lmcache.server.metrics.MetricsBinder;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.module.EngineDrivenTransferModule;
import io.lmcache.server.module.LmcacheDrivenTransferModule;
import io.lmcache.server.module.LookupLeases;
import io.lmcache.server.module.LookupModule;
import io.lmcache.server.module.ManagementModule;
import io.lmcache.server.module.PrefetchResults;
import io.lmcache.server.module.ServerOps;
import io.lmcache.server.storage.EvictionController;
import io.lmcache.server.storage.L1Tier;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Builds the server's parts in dependency order, starts them, and stops them in reverse. */
public final class LmcacheServer implements AutoCloseable, ServerRoutes.Server {
    private static final Logger LOG = LoggerFactory.getLogger(LmcacheServer.class);
    private static final long DRAIN_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(10);
    /** The loop wakes at least every 100 ms even when idle; a longer silence means it is stuck. */
    private static final long LOOP_STALL_NS = TimeUnit.SECONDS.toNanos(2);
    /** A reaped worker's release (unmap, IPC close) that takes longer is logged and counted. */
    private static final long RELEASE_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(10);
    private static final long ACTIVITY_INTERVAL_NS = TimeUnit.SECONDS.toNanos(10);

    private final ServerConfig config;
    private final ServerMetrics metrics = new ServerMetrics();
    private final ReplyQueue replies = new ReplyQueue();
    private final GpuBackend gpu;
    private final L1Tier l1;
    private final LookupLeases leases;
    private final PrefetchResults prefetchResults;
    private final PeerConnections connections;
    private final LmcacheDrivenTransferModule lmcacheDriven;
    private final EngineDrivenTransferModule engineDriven;
    private final ManagementModule management;
    private final Dispatcher dispatcher;
    private final RequestLoop loop;
    private final HttpApi http;
    private final HttpApi prometheusHttp;
    private final LookupModule lookup;
    private final ActivityLog activityLog;
    // agents (the thread map is in package-info): set by start(), closed by close()
    private final AgentErrors agentErrors = new AgentErrors();
    private AgentRunner housekeeping;
    private AgentRunner cudaEvents;
    private final ReleaseThread releases;
    private final Reaper reaper;
    private final CountDownLatch stopped = new CountDownLatch(1);
    private volatile boolean closed;

    private LmcacheServer(ServerConfig config) {
        this.config = config;
        gpu = openGpu(config.device());
        try {
            l1 = new L1Tier(config);
        } catch (RuntimeException e) {
            if (gpu != null) {
                gpu.close();
            }
            throw e;
        }
        leases = new LookupLeases(l1.store(), config.l1ReadTtlNs(), System::nanoTime);
        prefetchResults = new PrefetchResults(config.l1ReadTtlNs(), System::nanoTime);
        // closed connections are remembered long enough for every liveness rule to use them
        connections = new PeerConnections(System::nanoTime, Math.max(config.workerRegistrationGraceNs(), TimeUnit.MINUTES.toNanos(10)));
        Liveness liveness = new Liveness(System::nanoTime, connections, config.workerDisconnectGraceNs());
        releases = ReleaseThread.withTimeout(releaseTimeoutNs(config));
        lookup = new LookupModule(config.chunkSize(), l1.store(), leases, prefetchResults, metrics);
        lmcacheDriven = config.supportedTransferMode().allowsLmcacheDriven()
                ? new LmcacheDrivenTransferModule(config.chunkSize(), l1.store(), l1.pool().segment(), leases, metrics, liveness, gpu, releases)
                : null;
        engineDriven = config.supportedTransferMode().allowsEngineDriven()
                ? new EngineDrivenTransferModule(config.chunkSize(), l1.store(), l1.pool(), leases, metrics, liveness, config.l1WriteTtlNs(),
                        config.l1ReadTtlNs()) : null;
        // built last: the reaper runs over modules that are complete
        List<InstanceLivenessTarget> targets = new java.util.ArrayList<>();
        if (lmcacheDriven != null) {
            targets.add(lmcacheDriven);
        }
        if (engineDriven != null) {
            targets.add(engineDriven);
        }
        reaper = new Reaper(targets, config.workerReapTimeoutNs(), config.workerRegistrationGraceNs(),
                config.workerDisconnectGraceNs(), releases, connections, System::nanoTime);
        management = new ManagementModule(config.chunkSize(), l1.store(), targets, reaper, livenessSettings(config));
        MetricsBinder.bindStore(metrics, l1.store());
        MetricsBinder.bindLiveness(metrics, reaper);
        ReleaseMetrics.bind(metrics, reaper, releases);
        MetricsBinder.bindLookups(metrics, lookup::pendingResults);
        if (gpu != null) {
            MetricsBinder.bindGpu(metrics, gpu);
        }
        dispatcher = new Dispatcher(ServerOps.table(management, lookup, lmcacheDriven, engineDriven), replies, metrics, config.maxCpuWorkers(),
                config.maxGpuWorkers());
        // runs on: lmcache-housekeeping (the activity log's turn)
        activityLog = new ActivityLog(metrics, l1.store(), reaper::trackedInstances, ACTIVITY_INTERVAL_NS);
        HttpApi createdHttp = null;
        HttpApi createdPrometheus = null;
        try {
            createdHttp = config.httpPort() == 0 ? null : createHttp(config);
            createdPrometheus = config.prometheusPort() == 0 ? null : createPrometheusHttp(config);
            loop = new RequestLoop(config.zmqEndpoint(), dispatcher, replies, connections);
        } catch (RuntimeException e) {
            if (createdHttp != null) {
                createdHttp.close();
            }
            if (createdPrometheus != null) {
                createdPrometheus.close();
            }
            l1.close();
            if (gpu != null) {
                gpu.close();
            }
            throw e;
        }
        http = createdHttp;
        prometheusHttp = createdPrometheus;
    }

    private HttpApi createHttp(ServerConfig config) {
        try {
            HttpApi api = new HttpApi(config.httpHost(), config.httpPort());
            CoreRoutes.register(api, this::unhealthyReason, metrics.prometheus());
            ServerRoutes.register(api, this, new AdminGuard(config.httpAdminToken()));
            if (config.testHooks()) {
                LOG.warn("TEST HOOKS ENABLED (--test-hooks): POST /test/halt-loop stops the request loop");
                api.route("/test/halt-loop", (method, exchange) -> {
                    loop.halt();
                    return HttpApi.Response.json(200, java.util.Map.of("halted", true));
                });
                api.route("/test/block-next-release", (method, exchange) -> {
                    // runs on: the HTTP server thread; the release thread picks the flag up
                    releases.blockNextRelease();
                    return HttpApi.Response.json(200, java.util.Map.of("armed", true));
                });
            }
            if (!config.hasAdminToken() && !isLoopback(config.httpHost())) {
                LOG.warn("HTTP is bound to {} with no admin token: status and metrics are open to the network; the mutating"
                        + " endpoints (/cache/clear, /metrics/reset, /loglevel) accept loopback clients only until you set"
                        + " --http-admin-token or {}", config.httpHost(), io.lmcache.server.config.ConfigLoader.ENV_ADMIN_TOKEN);
            }
            return api;
        } catch (java.io.IOException e) {
            throw new IllegalStateException("cannot bind the HTTP API to " + config.httpHost() + ":" + config.httpPort() + ": " + e.getMessage(), e);
        }
    }

    /** The release timeout; tests with --test-hooks may shorten it through LMCACHE_TEST_RELEASE_TIMEOUT_MS. */
    private static long releaseTimeoutNs(ServerConfig config) {
        String override = config.testHooks() ? System.getenv("LMCACHE_TEST_RELEASE_TIMEOUT_MS") : null;
        return override == null ? RELEASE_TIMEOUT_NS : TimeUnit.MILLISECONDS.toNanos(Long.parseLong(override));
    }

    /** The CUDA backend, or null when this server serves CPU workers only (said in the log either way). */
    private static GpuBackend openGpu(DeviceMode mode) {
        if (mode == DeviceMode.HOST) {
            LOG.info("device path: host only (--device host): serving CPU shared-memory workers");
            return null;
        }
        try {
            GpuBackend backend = GpuBackend.open();
            LOG.info("device path: CUDA ({}); GPU workers over CUDA IPC, CPU workers over shared memory", backend.describe());
            return backend;
        } catch (CudaException | LinkageError e) {
            if (mode == DeviceMode.CUDA) {
                throw new IllegalStateException("--device cuda: no usable CUDA driver or GPU: " + e.getMessage(), e);
            }
            LOG.info("device path: host only (CUDA not available: {}); serving CPU shared-memory workers", e.getMessage());
            return null;
        }
    }

    private HttpApi createPrometheusHttp(ServerConfig config) {
        try {
            HttpApi api = new HttpApi(config.httpHost(), config.prometheusPort());
            CoreRoutes.register(api, this::unhealthyReason, metrics.prometheus());
            return api;
        } catch (java.io.IOException e) {
            throw new IllegalStateException("cannot bind the metrics port " + config.httpHost() + ":" + config.prometheusPort() + ": "
                    + e.getMessage(), e);
        }
    }

    private static boolean isLoopback(String host) {
        try {
            return java.net.InetAddress.getByName(host).isLoopbackAddress();
        } catch (java.net.UnknownHostException e) {
            return false;
        }
    }

    // --- what HTTP shows -------------------------------------------------------------------------

    /** LMCache's {@code /status} fields, plus pool preparation progress. */
    @Override
    public java.util.Map<String, Object> status() {
        java.util.Map<String, Object> status = new java.util.LinkedHashMap<>();
        String unhealthy = unhealthyReason();
        status.put("is_healthy", unhealthy == null);
        if (unhealthy != null) {
            status.put("unhealthy_reason", unhealthy);
        }
        status.put("engine_type", "MPCacheServer");
        status.put("server", "lmcache-server (Java) " + io.lmcache.server.config.Versions.version());
        status.put("instance_id", config.instanceId());
        status.put("chunk_size", config.chunkSize());
        status.put("hash_algorithm", "sha256-prefix-chain");
        status.put("active_sessions", leases.size());
        status.put("storage_manager", storageStatus());
        status.put("active_prefetch_jobs", lookup.pendingResults());
        if (lmcacheDriven != null) {
            lmcacheDriven.status(status, connections);
        }
        if (engineDriven != null) {
            engineDriven.status(status);
        }
        status.put("worker_liveness", management.livenessStatus());
        status.put("connections", java.util.Map.of("open", connections.openConnections()));
        if (gpu != null) {
            status.put("cuda", gpu.status());
        }
        return status;
    }

    private java.util.Map<String, Object> storageStatus() {
        io.lmcache.server.storage.ObjectStore.Snapshot s = l1.store().snapshot();
        java.util.Map<String, Object> manager = new java.util.LinkedHashMap<>();
        manager.put("is_healthy", l1.pool().preparationError().isEmpty());
        manager.put("shared_l1", l1.pool().isShared());
        manager.put("shm_name", l1.pool().shmName());
        manager.put("total_object_count", s.objects());
        manager.put("write_locked_count", s.writeLocked());
        manager.put("read_locked_count", s.readLocked());
        manager.put("pinned_count", s.pinned());
        manager.put("temporary_count", 0);
        manager.put("staging_object_count", 0);
        manager.put("staging_bytes", 0);
        manager.put("memory_used_bytes", s.usedBytes());
        manager.put("memory_total_bytes", s.poolBytes());
        manager.put("memory_configured_bytes", config.l1SizeBytes());
        manager.put("memory_ready_bytes", s.readyBytes());
        manager.put("memory_usage_ratio", s.usageRatio());
        manager.put("write_ttl_seconds", config.l1WriteTtlNs() / 1e9);
        manager.put("read_ttl_seconds", config.l1ReadTtlNs() / 1e9);
        java.util.Map<String, Object> preparation = new java.util.LinkedHashMap<>();
        preparation.put("regions_total", l1.pool().regionCount());
        preparation.put("regions_prepared", l1.pool().preparedRegions());
        preparation.put("region_bytes", l1.pool().regionBytes());
        preparation.put("progress_ratio", (double) l1.pool().preparedRegions() / l1.pool().regionCount());
        preparation.put("stages", gpu == null ? java.util.List.of("prefault") : java.util.List.of("prefault", "pin"));
        preparation.put("error", l1.pool().preparationError());
        manager.put("pool_preparation", preparation);
        java.util.Map<String, Object> eviction = new java.util.LinkedHashMap<>();
        eviction.put("policy", config.evictionPolicy().flagValue());
        eviction.put("trigger_watermark", config.evictionTriggerWatermark());
        eviction.put("eviction_ratio", config.evictionRatio());
        java.util.Map<String, Object> storage = new java.util.LinkedHashMap<>();
        storage.put("is_healthy", l1.pool().preparationError().isEmpty());
        storage.put("l1_usage", java.util.List.of(s.usedBytes(), s.poolBytes()));
        storage.put("l1_manager", manager);
        storage.put("l1_managers", java.util.Map.of("default", manager));
        storage.put("eviction", eviction);
        storage.put("l1_eviction_controller", java.util.Map.of("is_healthy", true, "eviction_policy", config.evictionPolicy().flagValue(),
                "trigger_watermark", config.evictionTriggerWatermark(), "eviction_ratio", config.evictionRatio()));
        storage.put("num_l2_adapters", 0);
        return storage;
    }

    /** {@code /config}: the effective configuration, grouped as LMCache groups it (the admin token redacted). */
    @Override
    public java.util.Map<String, Object> config() {
        java.util.Map<String, Object> all = config.describe();
        java.util.Map<String, Object> mp = new java.util.LinkedHashMap<>();
        java.util.Map<String, Object> storage = new java.util.LinkedHashMap<>();
        java.util.Map<String, Object> observability = new java.util.LinkedHashMap<>();
        for (java.util.Map.Entry<String, Object> entry : all.entrySet()) {
            String key = entry.getKey();
            if (key.startsWith("l1_") || key.startsWith("eviction_")) {
                storage.put(key, entry.getValue());
            } else if (key.startsWith("http_") || key.startsWith("prometheus_")) {
                observability.put(key, entry.getValue());
            } else {
                mp.put(key, entry.getValue());
            }
        }
        return java.util.Map.of("mp", mp, "storage_manager", storage, "observability", observability);
    }

    @Override
    public java.util.Map<String, Object> clear(boolean force) {
        io.lmcache.server.storage.ObjectStore.ClearResult result = l1.store().clear(force);
        LOG.info("/cache/clear (force={}): removed {} object(s), {} MiB", force, result.removed(), result.bytes() >> 20);
        java.util.Map<String, Object> cleared = new java.util.LinkedHashMap<>();
        cleared.put("objects", result.removed());
        cleared.put("bytes", result.bytes());
        cleared.put("deferred", result.deferred());
        return cleared;
    }

    @Override
    public void resetMetrics() {
        metrics.reset();
    }

    private static java.util.Map<String, Object> livenessSettings(ServerConfig config) {
        java.util.Map<String, Object> settings = new java.util.LinkedHashMap<>();
        settings.put("reap_timeout_seconds", config.workerReapTimeoutNs() / 1e9);
        settings.put("registration_grace_seconds", config.workerRegistrationGraceNs() / 1e9);
        settings.put("disconnect_grace_seconds", config.workerDisconnectGraceNs() / 1e9);
        return settings;
    }

    /** Null when healthy; otherwise what is wrong (for /healthcheck). */
    public String unhealthyReason() {
        if (closed) {
            return "shutting down";
        }
        if (!loop.isRunning()) {
            return "request loop is not running";
        }
        long sinceTurnNs = System.nanoTime() - loop.lastTurnNs();
        if (sinceTurnNs > LOOP_STALL_NS) {
            return "request loop has not turned for " + TimeUnit.NANOSECONDS.toMillis(sinceTurnNs) + " ms";
        }
        if (l1.store().snapshot().readyBytes() == 0) {
            String error = l1.pool().preparationError();
            return error.isEmpty() ? "no L1 pool memory is ready yet" : "the L1 pool is unusable: " + error;
        }
        return null;
    }

    /** Builds and starts a server; throws when a resource (port, memory) is unavailable. */
    public static LmcacheServer start(ServerConfig config) {
        LOG.info("lmcache-server {} starting (instance {})", Versions.version(), config.instanceId());
        LOG.info("configuration: {}", config.describe());
        LmcacheServer server = new LmcacheServer(config);
        // runs on: lmcache-housekeeping (each eviction tick)
        List<EvictionController.Sweeper> sweepers = new java.util.ArrayList<>(List.of(server.leases::sweep, server.prefetchResults::sweep));
        if (server.engineDriven != null) {
            sweepers.add(server.engineDriven::sweep);
        }
        List<io.lmcache.server.storage.L1Pool.RegionStage> stages = List.of();
        if (server.gpu != null) {
            server.gpu.pinnedPool(server.l1.pool().regionCount(), server.l1.pool().regionBytes());
            stages = List.of(new io.lmcache.server.storage.L1Pool.RegionStage() {
                @Override
                public String name() {
                    return "pin";
                }

                @Override
                public void prepare(int region, java.lang.foreign.MemorySegment slice) { // runs on: lmcache-pool-prepare
                    server.gpu.pin(region, slice);
                }
            });
        }
        EvictionController eviction = server.l1.start(config, stages, sweepers);
        server.housekeeping = Housekeeping.start(server.agentErrors, List.of(eviction, server.activityLog, server.reaper, server.releases));
        server.cudaEvents = server.gpu != null ? CudaEventsAgent.start(server.gpu.eventPoller(), server.agentErrors) : null;
        server.loop.start();
        server.management.start();
        if (server.prometheusHttp != null) {
            server.prometheusHttp.start();
        }
        if (server.http != null) {
            server.http.start();
        }
        LOG.info("ready: ZeroMQ ROUTER on {}, chunk size {}", config.zmqEndpoint(), config.chunkSize());
        return server;
    }

    public ServerConfig serverConfig() {
        return config;
    }

    public ServerMetrics metrics() {
        return metrics;
    }

    /** Test hook and /healthcheck check: stops the request loop without draining. */
    public void haltLoop() throws InterruptedException {
        loop.halt();
    }

    /** Blocks until {@link #close()} has finished. */
    public void awaitStopped() throws InterruptedException {
        stopped.await();
    }

    /** Graceful stop: stop accepting, answer what is in flight, then release everything. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        LOG.info("shutting down: answering in-flight requests, then closing");
        try {
            // the reaper first, so no reap runs against modules that are closing
            management.close();
            loop.shutdown(DRAIN_TIMEOUT_NS);
            if (http != null) {
                http.close();
            }
            if (prometheusHttp != null) {
                prometheusHttp.close();
            }
            dispatcher.close();
            // housekeeping (eviction, sweeps, activity log) stops before the modules it sweeps close
            housekeeping.close();
            if (lmcacheDriven != null) {
                lmcacheDriven.close();
            }
            if (engineDriven != null) {
                engineDriven.close();
            }
            releases.close();
            if (gpu != null) {
                // transfers in flight finish, the pool is unpinned, before its memory goes
                l1.stopPreparation();
                gpu.close();
                cudaEvents.close();
            }
            l1.close();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Exception e) {
            LOG.warn("error while shutting down", e);
        } finally {
            stopped.countDown();
            LOG.info("shut down");
        }
    }
}
