package io.lmcache.server.metrics;

import io.lmcache.server.storage.ChunkLifecycle;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * The chunk lifecycle histograms under LMCache's names: {@code l1_chunk_lifetime_seconds},
 * {@code l1_chunk_idle_before_evict_seconds}, {@code l1_chunk_reuse_gap_seconds},
 * {@code l1_chunk_evict_reuse_gap_seconds}, and per cache salt {@code real_reuse_gap_seconds} and
 * {@code real_reuse_gap_objects_chunks}. Samples arrive under the object store's lock (a record is a
 * few atomic adds); meters are made on first use and dropped by {@code /metrics/reset}.
 */
final class LifecycleMetrics implements ChunkLifecycle.Sink {
    /** Seconds: a burst, a conversation turn, a session, a day. */
    private static final Duration[] BUCKETS = {Duration.ofMillis(100), Duration.ofSeconds(1), Duration.ofSeconds(5), Duration.ofSeconds(10),
        Duration.ofSeconds(30), Duration.ofMinutes(1), Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(30),
        Duration.ofHours(1), Duration.ofHours(6), Duration.ofHours(24)};
    /** Chunks of the same salt touched between two reads of one chunk. */
    private static final double[] ACCESS_BUCKETS = {1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000};

    private final ServerMetrics metrics;
    private final LabelValues labels;
    private final Map<String, Meter> meters = new ConcurrentHashMap<>();

    LifecycleMetrics(ServerMetrics metrics, LabelValues labels) {
        this.metrics = metrics;
        this.labels = labels;
        // runs on: lmcache-http-* (/metrics/reset)
        metrics.onReset(() -> {
            meters.values().forEach(metrics.registry()::remove);
            meters.clear();
        });
    }

    @Override
    public void lifetime(long ns) {
        timer("lmcache_mp.l1_chunk_lifetime", "sampled L1 chunks: eviction time minus store time", "").record(ns, TimeUnit.NANOSECONDS);
    }

    @Override
    public void idleBeforeEvict(long ns) {
        timer("lmcache_mp.l1_chunk_idle_before_evict", "sampled L1 chunks: eviction time minus last touch", "").record(ns, TimeUnit.NANOSECONDS);
    }

    @Override
    public void reuseGap(long ns) {
        timer("lmcache_mp.l1_chunk_reuse_gap", "sampled L1 chunks: time between two touches", "").record(ns, TimeUnit.NANOSECONDS);
    }

    @Override
    public void evictReuseGap(long ns) {
        timer("lmcache_mp.l1_chunk_evict_reuse_gap", "sampled L1 chunks: eviction to the next store of the same chunk (at most 300 s)", "")
                .record(ns, TimeUnit.NANOSECONDS);
    }

    @Override
    public void realReuseGap(String salt, long ns, long accesses) {
        String label = labels.of("cache_salt", salt);
        timer("lmcache_mp.real_reuse_gap", "sampled chunks: time from their last touch to a read, by cache salt", label)
                .record(ns, TimeUnit.NANOSECONDS);
        String key = "objects\0" + label;
        Meter summary = meters.get(key);
        if (summary == null) {
            summary = meters.computeIfAbsent(key, k -> DistributionSummary.builder("lmcache_mp.real_reuse_gap_objects").baseUnit("chunks")
                    .description("sampled chunks: chunks of the same salt touched between their last touch and a read").tag("cache_salt", label)
                    .serviceLevelObjectives(ACCESS_BUCKETS).register(metrics.registry()));
        }
        ((DistributionSummary) summary).record(accesses);
    }

    /** {@code salt} null-free: "" means the meter has no cache_salt label. */
    private Timer timer(String name, String help, String salt) {
        String key = name + '\0' + salt;
        Meter meter = meters.get(key);
        if (meter == null) {
            meter = meters.computeIfAbsent(key, k -> {
                Timer.Builder builder = Timer.builder(name).description(help).serviceLevelObjectives(BUCKETS);
                return (name.equals("lmcache_mp.real_reuse_gap") ? builder.tag("cache_salt", salt) : builder).register(metrics.registry());
            });
        }
        return (Timer) meter;
    }
}
