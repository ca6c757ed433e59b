package io.lmcache.server.http;

import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.l2.L2AdapterSpec;
import io.lmcache.server.storage.ObjectStore;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code GET /status/memory-pressure}: one entry per tier, L1 first and then each L2 adapter (never aggregated), each with its
 * used and capacity bytes and a level from its eviction watermark, as LMCache's closed PR #3818 shaped it
 * ({@code lmcache/v1/multiprocess/memory_pressure.py} @098e923d, {@code http_apis/info_api.py} @ed411e2d; the spec's §3.1). Not an
 * upstream contract: an operator's view of how close each tier is to evicting. Read-only and free of tenants' data, so unguarded
 * like {@code /status}.
 */
public final class MemoryPressureRoute {
    private static final Logger LOG = LoggerFactory.getLogger(MemoryPressureRoute.class);

    /** A tier's pressure, in rising order ({@link #UNKNOWN} aside: it ranks below every known level). */
    enum Level {
        UNKNOWN, NORMAL, HIGH, CRITICAL;

        String wire() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    private MemoryPressureRoute() {}

    public static void register(HttpApi api, ServerView view, ServerConfig config) {
        // runs on: lmcache-http-* (one virtual thread per exchange)
        api.route("/status/memory-pressure", (method, exchange) -> HttpApi.onlyGet(method, () -> {
            try {
                return HttpApi.Response.json(200, report(view, config));
            } catch (RuntimeException e) {
                LOG.warn("memory pressure snapshot failed: {}", e.toString());
                return HttpApi.Response.json(503, Map.of("detail", "memory pressure snapshot unavailable"));
            }
        }));
    }

    /**
     * The level of one tier: unknown without both numbers (or a capacity of 0), critical at or over its capacity, high at or over
     * its eviction watermark (none: never high), else normal.
     */
    static Level level(Long usedBytes, Long capacityBytes, Double triggerWatermark) {
        if (usedBytes == null || capacityBytes == null || usedBytes < 0 || capacityBytes <= 0) {
            return Level.UNKNOWN;
        }
        double ratio = (double) usedBytes / capacityBytes;
        if (ratio >= 1.0) {
            return Level.CRITICAL;
        }
        return triggerWatermark != null && ratio >= triggerWatermark ? Level.HIGH : Level.NORMAL;
    }

    static Map<String, Object> report(ServerView view, ServerConfig config) {
        List<Map<String, Object>> tiers = new ArrayList<>();
        tiers.add(l1(view.l1Store(), config));
        if (config.l2().enabled()) {
            tiers.addAll(l2(view, config));
        }
        Level overall = Level.UNKNOWN;
        boolean complete = true;
        for (Map<String, Object> tier : tiers) {
            Level level = Level.valueOf(((String) tier.get("level")).toUpperCase(Locale.ROOT));
            complete &= level != Level.UNKNOWN;
            overall = level.compareTo(overall) > 0 ? level : overall;
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("instance_id", config.instanceId());
        out.put("timestamp_ms", System.currentTimeMillis());
        out.put("overall_level", overall.wire());
        out.put("complete", complete);
        out.put("tiers", tiers);
        return out;
    }

    private static Map<String, Object> l1(ObjectStore store, ServerConfig config) {
        ObjectStore.Snapshot s = store.snapshot();
        return new Tier("l1", null, "dram", s.usedBytes(), s.poolBytes(), config.evictionTriggerWatermark(),
                config.evictionPolicy().flagValue(), "ok", List.of()).toMap();
    }

    /** Each adapter from its own status (its used and capacity bytes), with the watermark of its {@code "eviction"} object. */
    private static List<Map<String, Object>> l2(ServerView view, ServerConfig config) {
        List<Map<String, Object>> out = new ArrayList<>();
        Object storage = view.status().get("storage_manager");
        List<?> statuses = storage instanceof Map<?, ?> map && map.get("l2_adapters") instanceof List<?> list ? list : List.of();
        List<L2AdapterSpec> specs = config.l2().adapters();
        for (int i = 0; i < specs.size(); i++) {
            L2AdapterSpec spec = specs.get(i);
            L2AdapterSpec.EvictionSpec eviction = spec.eviction();
            Double watermark = eviction != null && eviction.lru() ? eviction.triggerWatermark() : null;
            String policy = eviction == null ? null : eviction.lru() ? "LRU" : "noop";
            if (!(i < statuses.size() && statuses.get(i) instanceof Map<?, ?> status)) {
                out.add(new Tier("l2", i, spec.type(), null, null, watermark, policy, "unknown", List.of("adapter " + i + " reported no status"))
                        .toMap());
                continue;
            }
            Long used = longOrNull(status.get("used_bytes"));
            Long capacity = longOrNull(status.get("max_capacity_bytes"));
            List<String> errors = new ArrayList<>();
            if (capacity == null || capacity <= 0) {
                errors.add("the adapter reports no capacity");
                capacity = null;
            }
            String health = status.get("is_healthy") instanceof Boolean healthy ? healthy ? "ok" : "failed" : "unknown";
            // the registered type name (fs_native), as the coordinator's events name an L2 backend; the status's "type" is a class name
            out.add(new Tier("l2", i, spec.type(), used, capacity, watermark, policy, health, errors).toMap());
        }
        return out;
    }

    private static Long longOrNull(Object value) {
        return value instanceof Number number ? number.longValue() : null;
    }

    /** One tier's entry; {@code adapterId} null for L1, the numbers null when unknown. */
    private record Tier(String tier, Integer adapterId, String backend, Long usedBytes, Long capacityBytes, Double triggerWatermark,
            String evictionPolicy, String health, List<String> errors) {
        Map<String, Object> toMap() {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("tier", tier);
            out.put("adapter_id", adapterId);
            out.put("backend_type", backend);
            out.put("used_bytes", usedBytes);
            out.put("capacity_bytes", capacityBytes);
            Level level = level(usedBytes, capacityBytes, triggerWatermark);
            out.put("used_ratio", level == Level.UNKNOWN ? null : (double) usedBytes / capacityBytes);
            out.put("trigger_watermark", triggerWatermark);
            out.put("eviction_policy", evictionPolicy);
            out.put("health", health);
            out.put("level", level.wire());
            out.put("collection_errors", errors);
            return out;
        }
    }
}
