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
    /** {@code --l2-admission} and the write budget's decisions, in bytes. */
    public final LongAdder admissionAdmittedBytes;
    public final LongAdder admissionAdmittedOnLookupBytes;
    public final LongAdder admissionSkippedBytes;
    public final LongAdder admissionBudgetDroppedBytes;
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
        storeSubmitted = m.counter(L2Catalogue.STORE_SUBMITTED_REQUESTS);
        storeSubmittedObjects = new Family(m, L2Catalogue.STORE_SUBMITTED_OBJECTS);
        storeCompletedObjects = new Family(m, L2Catalogue.STORE_COMPLETED_OBJECTS);
        storeFailedObjects = new Family(m, L2Catalogue.STORE_FAILED_OBJECTS);
        storeSkippedObjects = m.counter(L2Catalogue.STORE_SKIPPED_OBJECTS, "backlog");
        storeNoLayout = m.counter(L2Catalogue.STORE_SKIPPED_OBJECTS, "no_layout");
        storeAmbiguousLayout = m.counter(L2Catalogue.STORE_SKIPPED_OBJECTS, "ambiguous_layout");
        storeSlidingWindow = m.counter(L2Catalogue.STORE_SKIPPED_OBJECTS, "sliding_window");
        storeFlushedObjects = m.counter(L2Catalogue.STORE_FLUSHED_OBJECTS);
        storeFlushSkipped = m.counter(L2Catalogue.STORE_FLUSH_SKIPPED_OBJECTS);
        admissionAdmittedBytes = m.counter(L2Catalogue.ADMISSION_BYTES, "admitted");
        admissionAdmittedOnLookupBytes = m.counter(L2Catalogue.ADMISSION_BYTES, "admitted_on_lookup");
        admissionSkippedBytes = m.counter(L2Catalogue.ADMISSION_BYTES, "skipped");
        admissionBudgetDroppedBytes = m.counter(L2Catalogue.ADMISSION_BYTES, "budget_dropped");
        prefetchLookups = m.counter(L2Catalogue.PREFETCH_LOOKUP_REQUESTS);
        prefetchLookupObjects = new Family(m, L2Catalogue.PREFETCH_LOOKUP_OBJECTS);
        prefetchHitObjects = m.counter(L2Catalogue.PREFETCH_HIT_CHUNKS);
        loadSubmitted = m.counter(L2Catalogue.LOAD_SUBMITTED_REQUESTS);
        loadSubmittedObjects = new Family(m, L2Catalogue.LOAD_SUBMITTED_OBJECTS);
        loadCompletedObjects = new Family(m, L2Catalogue.LOAD_COMPLETED_OBJECTS);
        prefetchL1Oom = new Family(m, L2Catalogue.PREFETCH_FAILURE_CHUNKS, "l1_oom");
        prefetchNotFound = new Family(m, L2Catalogue.PREFETCH_FAILURE_CHUNKS, "not_found");
        prefetchNoLayout = m.counter(L2Catalogue.PREFETCH_REJECTED_REQUESTS, "no_layout");
        prefetchQueueFull = m.counter(L2Catalogue.PREFETCH_REJECTED_REQUESTS, "queue_full");
        prefetchObjectGroups = m.counter(L2Catalogue.PREFETCH_REJECTED_REQUESTS, "object_groups");
        prefetchTimeouts = m.counter(L2Catalogue.PREFETCH_TIMEOUT_REQUESTS);
        evictedObjects = new Family(m, L2Catalogue.EVICTED_OBJECTS);
    }

    /** Declares adapter {@code index}'s series; {@code usedBytes} is read on each scrape (lmcache-http-*). */
    public Adapter adapter(ServerMetrics m, int index, String type, LongSupplier usedBytes) {
        String[] tags = {type, Integer.toString(index)};
        AtomicInteger stores = new AtomicInteger();
        AtomicInteger loads = new AtomicInteger();
        AtomicLong loadBytes = new AtomicLong();
        Adapter adapter = new Adapter(m.counter(L2Catalogue.STORE_COMPLETED_REQUESTS, tags), m.counter(L2Catalogue.STORE_FAILED_REQUESTS, tags),
                m.counter(L2Catalogue.STORE_BYTES, tags), m.counter(L2Catalogue.LOAD_COMPLETED_REQUESTS, tags),
                m.counter(L2Catalogue.LOAD_BYTES, tags), stores, loads, loadBytes, new Throughput(m, L2Catalogue.STORE_THROUGHPUT, tags),
                new Throughput(m, L2Catalogue.LOAD_THROUGHPUT, tags));
        // runs on: lmcache-http-* (each scrape)
        m.gauge(L2Catalogue.INFLIGHT_STORES, stores::get, tags);
        m.gauge(L2Catalogue.INFLIGHT_LOADS, loads::get, tags);
        m.gauge(L2Catalogue.INFLIGHT_LOAD_MEMORY, loadBytes::get, tags);
        m.gauge(L2Catalogue.USAGE_BYTES, usedBytes::getAsLong, tags);
        adapters.add(adapter);
        return adapter;
    }

    /**
     * Adapter {@code index}'s own events ({@code lmcache_mp_l2_adapter_events_total{event}}), one series per name {@code counts}
     * has now (its names are fixed); read on each scrape, kept by the adapter. The object-format check (issue 27) counts here:
     * {@code format_mismatch_size} (fs_native, resp, valkey), {@code format_mismatch_layout} and {@code format_xattr_unsupported}
     * (fs_native).
     */
    public void adapterEvents(ServerMetrics m, int index, String type, Supplier<Map<String, Long>> counts) {
        for (String event : counts.get().keySet()) {
            m.functionCounter(L2Catalogue.ADAPTER_EVENTS, counts, c -> c.get().getOrDefault(event, 0L), type, Integer.toString(index), event);
        }
    }

    public Adapter adapter(int index) {
        return adapters.get(index);
    }

    /**
     * One counter per value of a label that comes from the wire ({@code cache_salt} or {@code model_name}, the entry's last label), next to
     * fixed values of its other labels: a
     * value's series is made at its first use (or by {@link #declare}), bounded by {@link LabelValues}. {@link #sum} is the total
     * over the values, zeroed with the series by {@code POST /metrics/reset}.
     */
    public static final class Family {
        private final ServerMetrics metrics;
        private final L2Catalogue entry;
        private final String label;
        private final String[] fixed;
        private final LongAdder total;

        Family(ServerMetrics metrics, L2Catalogue entry, String... fixed) {
            this.metrics = metrics;
            this.entry = entry;
            this.label = entry.spec().labels().getLast();
            this.fixed = fixed;
            this.total = new LongAdder();
            metrics.onReset(total::reset);
        }

        /** Makes {@code value}'s series now, at zero, so a dashboard sees it before the first event. */
        public LongAdder declare(String value) {
            String[] values = new String[fixed.length + 1];
            System.arraycopy(fixed, 0, values, 0, fixed.length);
            values[fixed.length] = metrics.label(label, value);
            return metrics.declare(entry, values);
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
        private final L2Catalogue entry;
        private final String[] values;

        Throughput(ServerMetrics metrics, L2Catalogue entry, String... values) {
            this.metrics = metrics;
            this.entry = entry;
            this.values = values;
            summary.set(create());
            // runs on: lmcache-http-* (the /metrics/reset request)
            metrics.onReset(() -> {
                metrics.registry().remove(summary.get());
                summary.set(create());
            });
        }

        private DistributionSummary create() {
            return metrics.summary(entry, values).serviceLevelObjectives(THROUGHPUT_BUCKETS).register(metrics.registry());
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
