package io.lmcache.server.http;

import io.lmcache.server.logging.LogText;
import io.lmcache.server.protocol.RequestDecoder;
import io.lmcache.server.transfer.ChunkHashes;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.config.Versions;
import io.lmcache.server.loop.RequestLoop;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.module.EngineDrivenTransferModule;
import io.lmcache.server.module.LmcacheDrivenTransferModule;
import io.lmcache.server.module.LookupLeases;
import io.lmcache.server.module.LookupModule;
import io.lmcache.server.module.ManagementModule;
import io.lmcache.server.peer.PeerConnections;
import io.lmcache.server.storage.L1Pool;
import io.lmcache.server.storage.L1Tier;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.TenantUsage;
import io.lmcache.server.tier.L2Tier;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What HTTP shows of a running server: {@code /status} (LMCache's fields plus pool preparation),
 * {@code /config}, {@code /cache/clear}, {@code /metrics/reset} and the health check, built from
 * the parts it is given. Every read here is O(1) in the stored objects and never takes the object
 * store's lock (the socket thread's inline LOOKUPs take it). Runs on the HTTP server's threads.
 */
public final class ServerView implements ServerRoutes.Server, HealthCheck {
    private static final Logger LOG = LoggerFactory.getLogger(ServerView.class);
    /** The loop wakes at least every 100 ms even when idle; a longer silence means it is stuck. */
    private static final long LOOP_STALL_NS = TimeUnit.SECONDS.toNanos(2);

    private final ServerConfig config;
    private final ServerMetrics metrics;
    private final L1Tier l1;
    private final L2Tier l2;
    private final LookupLeases leases;
    private final Map<String, Supplier<Map<String, Object>>> moreStorage;
    private final LookupModule lookup;
    private final Optional<LmcacheDrivenTransferModule> lmcacheDriven;
    private final Optional<EngineDrivenTransferModule> engineDriven;
    private final ManagementModule management;
    private final PeerConnections connections;
    private final RequestLoop loop;
    private final Supplier<Map<String, Object>> cudaStatus;
    private final List<String> preparationStages;
    private final HealthCheck rootHealth;
    /** Set once at start-up, before the HTTP servers start. */
    /** The parts' own {@code /status} blocks ({@code jit_warmup}, {@code gpu_warmups}): the assembly's. */
    private final Supplier<Map<String, Object>> partStatus;
    /** The part blocks shown inside {@code jit_warmup} rather than under their own names. */
    private static final Set<String> NESTED_PART_BLOCKS = Set.of("jit_warmup", "gpu_warmups");

    /**
     * What {@code storage_manager} shows: the two tiers, the LOOKUP leases on L1 objects, and more entries by name (the window
     * commit's, when it is on), read on lmcache-http-*.
     */
    public record Storage(L1Tier l1, L2Tier l2, LookupLeases leases, Map<String, Supplier<Map<String, Object>>> more) {}

    /**
     * The request modules whose state {@code /status} shows; {@code lmcacheDriven} and {@code engineDriven} are empty when the
     * transfer mode leaves them out.
     */
    public record Modules(LookupModule lookup, Optional<LmcacheDrivenTransferModule> lmcacheDriven,
            Optional<EngineDrivenTransferModule> engineDriven, ManagementModule management) {}

    /** The ZeroMQ side: the request loop (the health check's heartbeat) and its connections. */
    public record Transport(RequestLoop loop, PeerConnections connections) {}

    /**
     * The device path: {@code cudaStatus} answers null on a host without CUDA (no {@code cuda} field then), and the stages
     * the pool's regions go through.
     */
    public record Device(Supplier<Map<String, Object>> cudaStatus, List<String> preparationStages) {}

    /**
     * What only the composition root knows: {@code health} says what is wrong (shutting down, an agent that hit an Error) or
     * null; {@code parts} are the parts' own {@code /status} blocks by name.
     */
    public record Root(HealthCheck health, Supplier<Map<String, Object>> parts) {}

    /**
     * {@code rootHealth} says what only the composition root knows is wrong (shutting down, an agent that hit an Error), or
     * null.
     */
    public ServerView(ServerConfig config, ServerMetrics metrics, Storage storage, Modules modules, Transport transport, Device device,
            Root root) {
        this.config = config;
        this.metrics = metrics;
        this.l1 = storage.l1();
        this.l2 = storage.l2();
        this.leases = storage.leases();
        this.moreStorage = Map.copyOf(storage.more());
        this.lookup = modules.lookup();
        this.lmcacheDriven = modules.lmcacheDriven();
        this.engineDriven = modules.engineDriven();
        this.management = modules.management();
        this.connections = transport.connections();
        this.loop = transport.loop();
        this.cudaStatus = device.cudaStatus();
        this.preparationStages = List.copyOf(device.preparationStages());
        this.rootHealth = root.health();
        this.partStatus = root.parts();
    }

    /** The reaper's settings as {@code /status} shows them under {@code worker_liveness}. */
    public static Map<String, Object> livenessSettings(ServerConfig config) {
        Map<String, Object> settings = new LinkedHashMap<>();
        settings.put("reap_timeout_seconds", config.workerReapTimeoutNs() / 1e9);
        settings.put("registration_grace_seconds", config.workerRegistrationGraceNs() / 1e9);
        settings.put("disconnect_grace_seconds", config.workerDisconnectGraceNs() / 1e9);
        return settings;
    }

    /** Null when healthy; otherwise what is wrong (for /healthcheck). */
    @Override
    public String unhealthyReason() {
        // what only the composition root knows: shutting down, an agent that hit an Error
        String root = rootHealth.unhealthyReason();
        if (root != null) {
            return root;
        }
        if (!loop.isRunning()) {
            return "request loop is not running";
        }
        long sinceTurnNs = System.nanoTime() - loop.lastTurnNs();
        if (sinceTurnNs > LOOP_STALL_NS) {
            return "request loop has not turned for " + TimeUnit.NANOSECONDS.toMillis(sinceTurnNs) + " ms";
        }
        // a turning loop is not enough: the ZeroMQ path (I/O thread, ROUTER, handlers) must answer a PING
        String transport = loop.transportFailure();
        if (transport != null) {
            return transport;
        }
        if (l1.store().readyBytes() == 0) {
            String error = l1.pool().preparationError();
            return error.isEmpty() ? "no L1 pool memory is ready yet" : "the L1 pool is unusable: " + error;
        }
        return null;
    }

    /** LMCache's {@code /status} fields, plus pool preparation progress. */
    @Override
    public Map<String, Object> status() {
        Map<String, Object> status = new LinkedHashMap<>();
        String unhealthy = unhealthyReason();
        status.put("is_healthy", unhealthy == null);
        if (unhealthy != null) {
            status.put("unhealthy_reason", unhealthy);
        }
        status.put("engine_type", "MPCacheServer");
        status.put("server", "lmcache-server (Java) " + Versions.version());
        status.put("instance_id", LogText.statusValues(config.instanceId()));
        status.put("chunk_size", config.chunkSize());
        status.put("hash_algorithm", ChunkHashes.algorithm());
        status.put("chunk_hashes_reused", ChunkHashes.reusedChunks()); // copied from a recent key's chain, not computed
        status.put("token_ids_reused", RequestDecoder.tokenIdsReused()); // copied from a recently decoded key, not decoded
        status.put("active_sessions", leases.size());
        status.put("storage_manager", storageStatus());
        status.put("active_prefetch_jobs", lookup.pendingResults());
        lmcacheDriven.ifPresent(module -> {
            module.status(status, connections);
            status.put("request_path_cpu", loop.dispatchTimes().status());
        });
        engineDriven.ifPresent(module -> module.status(status));
        status.put("worker_liveness", management.livenessStatus());
        Map<String, Object> kvEvents = management.kvEventsStatus();
        if (kvEvents != null) {
            status.put("kv_events", kvEvents);
        }
        status.put("connections", Map.of("open", connections.openConnections()));
        status.put("aot_cache", AotCacheStatus.thisJvm().toMap());
        // what the start-up JIT warm-up did (and, where it goes on after ready, is doing), and the GPU warm-ups at each device's
        // first REGISTER: the warm-up parts' blocks
        Map<String, Object> parts = partStatus.get();
        Map<String, Object> jit = new LinkedHashMap<>(block(parts, "jit_warmup"));
        jit.put("gpu", block(parts, "gpu_warmups"));
        status.put("jit_warmup", jit);
        // every other part's block under its own name (events_trace, ...): a new part's block needs no line here
        parts.forEach((name, block) -> {
            if (!NESTED_PART_BLOCKS.contains(name)) {
                status.putIfAbsent(name, block);
            }
        });
        Map<String, Object> cuda = cudaStatus.get();
        if (cuda != null) {
            status.put("cuda", cuda);
        }
        return status;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> block(Map<String, Object> parts, String name) {
        Object block = parts.get(name);
        return block instanceof Map<?, ?> map ? (Map<String, Object>) map : Map.of();
    }

    private Map<String, Object> storageStatus() {
        ObjectStore.Snapshot s = l1.store().snapshot();
        L1Pool pool = l1.pool();
        Map<String, Object> manager = new LinkedHashMap<>();
        manager.put("is_healthy", pool.preparationError().isEmpty());
        manager.put("shared_l1", pool.isShared());
        manager.put("shm_name", LogText.statusValues(pool.shmName()));
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
        Map<String, Object> preparation = new LinkedHashMap<>();
        preparation.put("regions_total", pool.regionCount());
        preparation.put("regions_prepared", pool.preparedRegions());
        preparation.put("region_bytes", pool.regionBytes());
        preparation.put("progress_ratio", (double) pool.preparedRegions() / pool.regionCount());
        preparation.put("stages", preparationStages);
        preparation.put("threads", pool.preparationThreads());
        preparation.put("huge_pages", pool.preparationHugePages());
        preparation.put("error", LogText.statusValues(pool.preparationError()));
        preparation.put("numa", pool.numaStatus());
        manager.put("pool_preparation", preparation);
        Map<String, Object> eviction = new LinkedHashMap<>();
        eviction.put("policy", config.evictionPolicy().flagValue());
        eviction.put("trigger_watermark", config.evictionTriggerWatermark());
        eviction.put("eviction_ratio", config.evictionRatio());
        eviction.put("policy_state", l1.store().policyStatus());
        eviction.put("tenants", tenantCounts(l1.store().tenantUsage()));
        Map<String, Object> storage = new LinkedHashMap<>();
        storage.put("is_healthy", pool.preparationError().isEmpty());
        // where LMCache's `lmcache describe kvcache` reads the policy
        storage.put("eviction_controller", Map.of("eviction_policy", config.evictionPolicy().flagValue()));
        storage.put("l1_usage", List.of(s.usedBytes(), s.poolBytes()));
        storage.put("l1_manager", manager);
        storage.put("l1_managers", Map.of("default", manager));
        storage.put("eviction", eviction);
        storage.put("l1_eviction_controller", Map.of("is_healthy", true, "eviction_policy", config.evictionPolicy().flagValue(),
                "trigger_watermark", config.evictionTriggerWatermark(), "eviction_ratio", config.evictionRatio()));
        l2.putStatus(storage);
        moreStorage.forEach((name, block) -> storage.put(name, block.get()));
        return storage;
    }

    /** The tenants (IsolatedLRU's quota buckets) as counts only: a salt is a tenant's secret, shown by {@code /quota} to the admin. */
    static Map<String, Object> tenantCounts(List<TenantUsage> tenants) {
        int withQuota = 0;
        int overQuota = 0;
        for (TenantUsage tenant : tenants) {
            withQuota += tenant.quotaBytes() >= 0 ? 1 : 0;
            overQuota += tenant.quotaBytes() >= 0 && tenant.usedBytes() > tenant.quotaBytes() ? 1 : 0;
        }
        Map<String, Object> counts = new LinkedHashMap<>();
        counts.put("count", tenants.size());
        counts.put("with_quota", withQuota);
        counts.put("over_quota", overQuota);
        return counts;
    }

    /**
     * {@code /config}: the effective configuration, grouped as LMCache groups it (the admin token redacted), and under
     * {@code tuning} each {@code -Dlmcache.*} knob's effective value by its property name.
     */
    @Override
    public Map<String, Object> config() {
        Map<String, Object> mp = new LinkedHashMap<>();
        Map<String, Object> storage = new LinkedHashMap<>();
        Map<String, Object> observability = new LinkedHashMap<>();
        for (Map.Entry<String, Object> entry : config.describe().entrySet()) {
            String key = entry.getKey();
            // operator input echoed (a 94 KB --l2-adapter spec, a config file path): clipped like every status value
            Object value = LogText.statusValues(entry.getValue());
            if (key.startsWith("l1_") || key.startsWith("l2_") || key.startsWith("eviction_")) {
                storage.put(key, value);
            } else if (key.startsWith("http_") || key.startsWith("prometheus_")) {
                observability.put(key, value);
            } else {
                mp.put(key, value);
            }
        }
        return Map.of("mp", mp, "storage_manager", storage, "observability", observability, "tuning", config.tuning().describe());
    }

    /** The L1 object store ({@code /quota} reads and sets its tenants' quotas). */
    public ObjectStore l1Store() {
        return l1.store();
    }

    @Override
    public Map<String, Object> clear(boolean force) {
        ObjectStore.ClearResult result = l1.store().clear(force);
        LOG.info("/cache/clear (force={}): removed {} object(s), {} MiB", force, result.removed(), result.bytes() >> 20);
        Map<String, Object> cleared = new LinkedHashMap<>();
        cleared.put("objects", result.removed());
        cleared.put("bytes", result.bytes());
        cleared.put("deferred", result.deferred());
        return cleared;
    }

    @Override
    public void resetMetrics() {
        metrics.reset();
    }
}
