package io.lmcache.server.metrics;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * The L2 tier's series (hybrid-and-l2.md §B.10), all declared here at start-up: the controllers
 * count into these adders and never create a meter. LMCache's {@code cache_salt} and
 * {@code model_name} attributes are left out: both come from the wire, and a label per value would
 * let a client grow the registry without bound.
 */
public final class L2Metrics {
    /** One adapter's series, labelled {@code l2_name} (its type) and {@code adapter_index}. */
    public record Adapter(LongAdder storeCompleted, LongAdder storeFailed, LongAdder storeBytes, LongAdder loadCompleted, LongAdder loadBytes,
            AtomicInteger inflightStores, AtomicInteger inflightLoads) {}

    public final LongAdder storeSubmitted;
    public final LongAdder storeSubmittedObjects;
    public final LongAdder storeCompletedObjects;
    public final LongAdder storeFailedObjects;
    public final LongAdder storeSkippedObjects;
    public final LongAdder storeNoLayout;
    public final LongAdder storeAmbiguousLayout;
    public final LongAdder prefetchLookups;
    public final LongAdder prefetchLookupObjects;
    public final LongAdder prefetchHitObjects;
    public final LongAdder loadSubmitted;
    public final LongAdder loadSubmittedObjects;
    public final LongAdder loadCompletedObjects;
    public final LongAdder prefetchL1Oom;
    public final LongAdder prefetchNotFound;
    public final LongAdder prefetchNoLayout;
    public final LongAdder prefetchQueueFull;
    public final LongAdder prefetchObjectGroups;
    public final LongAdder prefetchTimeouts;
    public final LongAdder l1AllocationFailures;
    public final LongAdder evictedObjects;
    private final List<Adapter> adapters = new ArrayList<>();

    public L2Metrics(ServerMetrics m) {
        storeSubmitted = m.counter("lmcache_mp.l2_store_submitted", "L2 store tasks submitted (one per adapter and object shape)");
        storeSubmittedObjects = m.counter("lmcache_mp.l2_store_submitted_objects", "objects submitted for writing to L2");
        storeCompletedObjects = m.counter("lmcache_mp.l2_store_completed_objects", "objects written to L2 (tasks that succeeded)");
        storeFailedObjects = m.counter("lmcache_mp.l2_store_failed_objects", "objects of L2 store tasks that failed (not retried)");
        String skipped = "committed objects not written to L2, by reason (backlog: the write-through backlog was full; no_layout, "
                + "ambiguous_layout: no single registered world size has objects of that shape, so the packed kv rank is unknown)";
        storeSkippedObjects = m.counter("lmcache_mp.l2_store_skipped_objects", skipped, "reason", "backlog");
        storeNoLayout = m.counter("lmcache_mp.l2_store_skipped_objects", skipped, "reason", "no_layout");
        storeAmbiguousLayout = m.counter("lmcache_mp.l2_store_skipped_objects", skipped, "reason", "ambiguous_layout");
        prefetchLookups = m.counter("lmcache_mp.l2_prefetch_lookup", "LOOKUPs that asked L2 for the chunks L1 did not hit");
        prefetchLookupObjects = m.counter("lmcache_mp.l2_prefetch_lookup_objects", "objects asked of L2 by those LOOKUPs");
        prefetchHitObjects = m.counter("lmcache_mp.l2_prefetch_hit", "objects some L2 adapter reported present");
        loadSubmitted = m.counter("lmcache_mp.l2_prefetch_load_submitted", "L2 load tasks submitted");
        loadSubmittedObjects = m.counter("lmcache_mp.l2_prefetch_load_submitted_objects", "objects submitted for loading from L2");
        loadCompletedObjects = m.counter("lmcache_mp.l2_prefetch_load_completed", "objects loaded from L2 into L1");
        prefetchL1Oom = m.counter("lmcache_mp.l2_prefetch_failure", "objects found in L2 but not loaded, by reason", "reason", "l1_oom");
        prefetchNotFound = m.counter("lmcache_mp.l2_prefetch_failure", "objects found in L2 but not loaded, by reason", "reason", "not_found");
        prefetchNoLayout = m.counter("lmcache_mp.l2_prefetch_rejected", "LOOKUPs answered from L1 alone, by reason", "reason", "no_layout");
        prefetchQueueFull = m.counter("lmcache_mp.l2_prefetch_rejected", "LOOKUPs answered from L1 alone, by reason", "reason", "queue_full");
        prefetchObjectGroups = m.counter("lmcache_mp.l2_prefetch_rejected", "LOOKUPs answered from L1 alone, by reason", "reason",
                "object_groups");
        prefetchTimeouts = m.counter("lmcache_mp.l2_prefetch_timeout",
                "LOOKUPs whose L2 prefetch passed its deadline: answered with their L1 hits, the adapters' late answers cleaned up");
        l1AllocationFailures = m.counter("lmcache_mp.l1_allocation_failure", "chunks that found no room in L1", "during", "l2_prefetch");
        evictedObjects = m.counter("lmcache_mp.l2_evicted_objects", "objects L2 eviction removed");
    }

    /** Declares adapter {@code index}'s series; {@code usedBytes} is read on each scrape (lmcache-http-*). */
    public Adapter adapter(ServerMetrics m, int index, String type, LongSupplier usedBytes) {
        String[] tags = {"l2_name", type, "adapter_index", Integer.toString(index)};
        AtomicInteger stores = new AtomicInteger();
        AtomicInteger loads = new AtomicInteger();
        Adapter adapter = new Adapter(m.counter("lmcache_mp.l2_store_completed", "L2 store tasks that succeeded", tags),
                m.counter("lmcache_mp.l2_store_failed", "L2 store tasks that failed", tags),
                m.counter("lmcache_mp.l2_store_bytes", "bytes written to L2 (a key already there adds none)", tags),
                m.counter("lmcache_mp.l2_load_completed", "L2 load tasks finished", tags),
                m.counter("lmcache_mp.l2_load_bytes", "bytes loaded from L2", tags), stores, loads);
        // runs on: lmcache-http-* (each scrape)
        m.gauge("lmcache_mp.num_inflight_l2_stores", "L2 store tasks in flight", stores::get, tags);
        m.gauge("lmcache_mp.num_inflight_l2_loads", "L2 load tasks in flight", loads::get, tags);
        m.gauge("lmcache_mp.l2_usage_bytes", "bytes the adapter holds (fs_native: with earlier runs' files)", usedBytes::getAsLong, tags);
        adapters.add(adapter);
        return adapter;
    }

    public Adapter adapter(int index) {
        return adapters.get(index);
    }
}
