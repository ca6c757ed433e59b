package io.lmcache.server.metrics;

import io.micrometer.core.instrument.DistributionSummary;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * The L2 tier's series under LMCache's names and labels (hybrid-and-l2.md §B.10; LMCache's
 * {@code l2.py}, {@code l2_failures.py}, {@code l2_throughput.py} and the L1/L2 state gauges): its
 * counters carry their unit before {@code _total} as LMCache's OTel exporter writes them
 * ({@code l2_store_submitted_requests_total}, {@code l2_store_submitted_objects_chunks_total}, ...).
 * Objects are counted per {@code cache_salt} and failures per {@code model_name}, both values from the
 * wire and bounded by {@link LabelValues}; per-adapter series carry {@code l2_name} (the adapter's
 * type) and {@code adapter_index}. Series of our own that LMCache lacks: failed and skipped stores,
 * rejected and timed-out prefetches, and the bytes each adapter wrote and loaded.
 */
public final class L2Metrics {
    private static final double GB = 1e9;
    /** GB/s of one L2 task, submit to completion: from a slow network store to page-cache hits on a fast host. */
    private static final double[] THROUGHPUT_BUCKETS = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 50};

    /** One adapter's series, labelled {@code l2_name} (its type) and {@code adapter_index}. */
    public record Adapter(LongAdder storeCompleted, LongAdder storeFailed, LongAdder storeBytes, LongAdder loadCompleted, LongAdder loadBytes,
            AtomicInteger inflightStores, AtomicInteger inflightLoads, AtomicLong inflightLoadBytes, Throughput storeThroughput,
            Throughput loadThroughput) {}

    public final LongAdder storeSubmitted;
    public final Family storeSubmittedObjects;
    public final Family storeCompletedObjects;
    public final Family storeFailedObjects;
    public final LongAdder storeSkippedObjects;
    public final LongAdder storeNoLayout;
    public final LongAdder storeAmbiguousLayout;
    /** {@code --l2-store-policy full_attention_only}: sliding-window objects the write-through left in L1. */
    public final LongAdder storeSlidingWindow;
    /** The window commit ({@code --commit-policy}): objects copied to L2 at END_SESSION, and those it could not (gone from L1, backlog). */
    public final LongAdder storeFlushedObjects;
    public final LongAdder storeFlushSkipped;
    public final LongAdder prefetchLookups;
    public final Family prefetchLookupObjects;
    public final LongAdder prefetchHitObjects;
    public final LongAdder loadSubmitted;
    public final Family loadSubmittedObjects;
    public final Family loadCompletedObjects;
    public final Family prefetchL1Oom;
    public final Family prefetchNotFound;
    public final LongAdder prefetchNoLayout;
    public final LongAdder prefetchQueueFull;
    public final LongAdder prefetchObjectGroups;
    public final LongAdder prefetchTimeouts;
    public final Family evictedObjects;
    private final List<Adapter> adapters = new ArrayList<>();

    public L2Metrics(ServerMetrics m) {
        storeSubmitted = m.counter("lmcache_mp.l2_store_submitted_requests", "L2 store tasks submitted (one per adapter and batch of objects)");
        storeSubmittedObjects = new Family(m, "lmcache_mp.l2_store_submitted_objects_chunks", "objects submitted for writing to L2",
                "cache_salt");
        storeCompletedObjects = new Family(m, "lmcache_mp.l2_store_completed_objects_chunks", "objects written to L2 (tasks that succeeded)",
                "cache_salt");
        storeFailedObjects = new Family(m, "lmcache_mp.l2_store_failed_objects_chunks", "objects of L2 store tasks that failed (not retried)",
                "cache_salt");
        String skipped = "committed objects not written to L2, by reason (backlog: the write-through backlog was full; no_layout, "
                + "ambiguous_layout: no single registered world size has objects of that shape, so the packed kv rank is unknown)";
        storeSkippedObjects = m.counter("lmcache_mp.l2_store_skipped_objects_chunks", skipped, "reason", "backlog");
        storeNoLayout = m.counter("lmcache_mp.l2_store_skipped_objects_chunks", skipped, "reason", "no_layout");
        storeAmbiguousLayout = m.counter("lmcache_mp.l2_store_skipped_objects_chunks", skipped, "reason", "ambiguous_layout");
        storeSlidingWindow = m.counter("lmcache_mp.l2_store_skipped_objects_chunks", skipped, "reason", "sliding_window");
        storeFlushedObjects = m.counter("lmcache_mp.l2_store_flushed_objects_chunks",
                "objects a window commit (--commit-policy) submitted to L2 at END_SESSION, the L1 copy kept");
        storeFlushSkipped = m.counter("lmcache_mp.l2_store_flush_skipped_objects_chunks",
                "objects of a committed window not copied to L2 (no longer READY in L1, or the write-through backlog was full)");
        prefetchLookups = m.counter("lmcache_mp.l2_prefetch_lookup_requests", "LOOKUPs that asked L2 for the chunks L1 did not hit");
        prefetchLookupObjects = new Family(m, "lmcache_mp.l2_prefetch_lookup_objects_chunks", "objects asked of L2 by those LOOKUPs",
                "cache_salt");
        prefetchHitObjects = m.counter("lmcache_mp.l2_prefetch_hit_chunks", "objects some L2 adapter reported present");
        loadSubmitted = m.counter("lmcache_mp.l2_prefetch_load_submitted_requests", "L2 load tasks submitted (one per adapter and LOOKUP)");
        loadSubmittedObjects = new Family(m, "lmcache_mp.l2_prefetch_load_submitted_objects_chunks", "objects submitted for loading from L2",
                "cache_salt");
        loadCompletedObjects = new Family(m, "lmcache_mp.l2_prefetch_load_completed_chunks", "objects loaded from L2 into L1", "cache_salt");
        prefetchL1Oom = new Family(m, "lmcache_mp.l2_prefetch_failure_chunks", "objects found in L2 but not loaded, by reason", "model_name",
                "reason", "l1_oom");
        prefetchNotFound = new Family(m, "lmcache_mp.l2_prefetch_failure_chunks", "objects found in L2 but not loaded, by reason",
                "model_name", "reason", "not_found");
        prefetchNoLayout = m.counter("lmcache_mp.l2_prefetch_rejected_requests", "LOOKUPs answered from L1 alone, by reason", "reason",
                "no_layout");
        prefetchQueueFull = m.counter("lmcache_mp.l2_prefetch_rejected_requests", "LOOKUPs answered from L1 alone, by reason", "reason",
                "queue_full");
        prefetchObjectGroups = m.counter("lmcache_mp.l2_prefetch_rejected_requests", "LOOKUPs answered from L1 alone, by reason", "reason",
                "object_groups");
        prefetchTimeouts = m.counter("lmcache_mp.l2_prefetch_timeout_requests",
                "LOOKUPs whose L2 prefetch passed its deadline: answered with their L1 hits, the adapters' late answers cleaned up");
        evictedObjects = new Family(m, "lmcache_mp.l2_evicted_objects_chunks", "objects L2 eviction removed", "cache_salt");
    }

    /** Declares adapter {@code index}'s series; {@code usedBytes} is read on each scrape (lmcache-http-*). */
    public Adapter adapter(ServerMetrics m, int index, String type, LongSupplier usedBytes) {
        String[] tags = {"l2_name", type, "adapter_index", Integer.toString(index)};
        AtomicInteger stores = new AtomicInteger();
        AtomicInteger loads = new AtomicInteger();
        AtomicLong loadBytes = new AtomicLong();
        Adapter adapter = new Adapter(m.counter("lmcache_mp.l2_store_completed_requests", "L2 store tasks that succeeded", tags),
                m.counter("lmcache_mp.l2_store_failed_requests", "L2 store tasks that failed", tags),
                m.counter("lmcache_mp.l2_store_bytes", "bytes written to L2 (a key already there adds none)", tags),
                m.counter("lmcache_mp.l2_load_completed_requests", "L2 load tasks finished (one per adapter and LOOKUP)", tags),
                m.counter("lmcache_mp.l2_load_bytes", "bytes loaded from L2", tags), stores, loads, loadBytes,
                new Throughput(m, "lmcache_mp.l2_store_throughput_GB_per_second",
                        "GB/s of each L2 store task that wrote bytes, submit to completion (queueing and I/O included)", tags),
                new Throughput(m, "lmcache_mp.l2_load_throughput_GB_per_second",
                        "GB/s of each L2 load task that loaded bytes, submit to completion (queueing and I/O included)", tags));
        // runs on: lmcache-http-* (each scrape)
        m.gauge("lmcache_mp.num_inflight_l2_stores", "L2 store tasks in flight", stores::get, tags);
        m.gauge("lmcache_mp.num_inflight_l2_loads", "L2 load tasks in flight", loads::get, tags);
        m.gauge("lmcache_mp.inflight_load_memory_usage_bytes", "L1 bytes reserved by L2 loads in flight", loadBytes::get, tags);
        m.gauge("lmcache_mp.l2_usage_bytes", "bytes the adapter holds (fs_native: with earlier runs' files)", usedBytes::getAsLong, tags);
        adapters.add(adapter);
        return adapter;
    }

    /**
     * Adapter {@code index}'s own events ({@code lmcache_mp_l2_adapter_events_total{event}}), one series per name {@code counts}
     * has now (its names are fixed); read on each scrape, kept by the adapter.
     */
    public void adapterEvents(ServerMetrics m, int index, String type, Supplier<Map<String, Long>> counts) {
        for (String event : counts.get().keySet()) {
            m.functionCounter("lmcache_mp.l2_adapter_events", "the adapter's own events, by kind (its /status entry says more)", counts,
                    c -> c.get().getOrDefault(event, 0L), "l2_name", type, "adapter_index", Integer.toString(index), "event", event);
        }
    }

    public Adapter adapter(int index) {
        return adapters.get(index);
    }

    /**
     * One counter per value of a label that comes from the wire ({@code cache_salt} or {@code model_name}), next to fixed tags: a
     * value's series is made at its first use (or by {@link #declare}), bounded by {@link LabelValues}. {@link #sum} is the total
     * over the values, zeroed with the series by {@code POST /metrics/reset}.
     */
    public static final class Family {
        private final ServerMetrics metrics;
        private final String name;
        private final String help;
        private final String label;
        private final String[] fixed;
        private final LongAdder total;

        Family(ServerMetrics metrics, String name, String help, String label, String... fixed) {
            this.metrics = metrics;
            this.name = name;
            this.help = help;
            this.label = label;
            this.fixed = fixed;
            this.total = new LongAdder();
            metrics.onReset(total::reset);
        }

        /** Makes {@code value}'s series now, at zero, so a dashboard sees it before the first event. */
        public LongAdder declare(String value) {
            String[] tags = new String[fixed.length + 2];
            System.arraycopy(fixed, 0, tags, 0, fixed.length);
            tags[fixed.length] = label;
            tags[fixed.length + 1] = metrics.label(label, value);
            return metrics.declare(name, help, tags);
        }

        public void add(String value, long count) {
            if (count > 0) {
                declare(value).add(count);
                total.add(count);
            }
        }

        public long sum() {
            return total.sum();
        }
    }

    /**
     * A GB/s histogram, one sample per task. Histograms cannot be zeroed: {@code POST /metrics/reset} replaces it with a new one (a
     * sample recorded meanwhile may land in the old one).
     */
    public static final class Throughput {
        private final AtomicReference<DistributionSummary> summary = new AtomicReference<>();
        private final ServerMetrics metrics;
        private final String name;
        private final String help;
        private final String[] tags;

        Throughput(ServerMetrics metrics, String name, String help, String... tags) {
            this.metrics = metrics;
            this.name = name;
            this.help = help;
            this.tags = tags;
            summary.set(create());
            // runs on: lmcache-http-* (the /metrics/reset request)
            metrics.onReset(() -> {
                metrics.registry().remove(summary.get());
                summary.set(create());
            });
        }

        private DistributionSummary create() {
            return DistributionSummary.builder(name).description(help).tags(tags).serviceLevelObjectives(THROUGHPUT_BUCKETS)
                    .register(metrics.registry());
        }

        /** {@code bytes} moved in {@code elapsedNs}; nothing moved (every key already there) or no time measured gives no sample. */
        public void record(long bytes, long elapsedNs) {
            if (bytes > 0 && elapsedNs > 0) {
                summary.get().record(bytes / GB / (elapsedNs / 1e9));
            }
        }

        /** How many samples the histogram holds (tests). */
        public long count() {
            return summary.get().count();
        }
    }
}
