package io.lmcache.server.metrics;

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
public final class LifecycleMetrics {
    /** Seconds: a burst, a conversation turn, a session, a day. */
    private static final Duration[] BUCKETS = {Duration.ofMillis(100), Duration.ofSeconds(1), Duration.ofSeconds(5), Duration.ofSeconds(10),
        Duration.ofSeconds(30), Duration.ofMinutes(1), Duration.ofMinutes(5), Duration.ofMinutes(10), Duration.ofMinutes(30),
        Duration.ofHours(1), Duration.ofHours(6), Duration.ofHours(24)};
    /** Chunks of the same salt touched between two reads of one chunk. */
    private static final double[] ACCESS_BUCKETS = {1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000};

    private final ServerMetrics metrics;
    private final LabelValues labels;
    private final Map<String, Meter> meters = new ConcurrentHashMap<>();

    /** The histograms of {@code metrics}; the object store's lifecycle sampler feeds them (storage binds it). */
    public LifecycleMetrics(ServerMetrics metrics) {
        this.metrics = metrics;
        this.labels = metrics.labels();
        // runs on: lmcache-http-* (/metrics/reset)
        metrics.onReset(() -> {
            meters.values().forEach(metrics.registry()::remove);
            meters.clear();
        });
    }

    public void lifetime(long ns) {
        timer(L1Catalogue.CHUNK_LIFETIME, "").record(ns, TimeUnit.NANOSECONDS);
    }

    public void idleBeforeEvict(long ns) {
        timer(L1Catalogue.CHUNK_IDLE_BEFORE_EVICT, "").record(ns, TimeUnit.NANOSECONDS);
    }

    public void reuseGap(long ns) {
        timer(L1Catalogue.CHUNK_REUSE_GAP, "").record(ns, TimeUnit.NANOSECONDS);
    }

    public void evictReuseGap(long ns) {
        timer(L1Catalogue.CHUNK_EVICT_REUSE_GAP, "").record(ns, TimeUnit.NANOSECONDS);
    }

    public void realReuseGap(String salt, long ns, long accesses) {
        String label = labels.of("cache_salt", salt);
        timer(L1Catalogue.REAL_REUSE_GAP, label).record(ns, TimeUnit.NANOSECONDS);
        String key = "objects\0" + label;
        Meter summary = meters.get(key);
        if (summary == null) {
            summary = meters.computeIfAbsent(key, k -> metrics.summary(L1Catalogue.REAL_REUSE_GAP_OBJECTS, label)
                    .serviceLevelObjectives(ACCESS_BUCKETS).register(metrics.registry()));
        }
        ((DistributionSummary) summary).record(accesses);
    }

    /** {@code salt} null-free: "" means the meter has no cache_salt label (the entry has none). */
    private Timer timer(L1Catalogue entry, String salt) {
        String key = entry.name() + '\0' + salt;
        Meter meter = meters.get(key);
        if (meter == null) {
            meter = meters.computeIfAbsent(key, k -> (entry.spec().labels().isEmpty() ? metrics.timer(entry) : metrics.timer(entry, salt))
                    .serviceLevelObjectives(BUCKETS).register(metrics.registry()));
        }
        return (Timer) meter;
    }
}
