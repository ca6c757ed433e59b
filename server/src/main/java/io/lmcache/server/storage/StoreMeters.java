package io.lmcache.server.storage;

import io.lmcache.server.metrics.L1Catalogue;
import io.lmcache.server.metrics.LifecycleMetrics;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.storage.StoreCounters.EvictionReason;
import java.util.concurrent.atomic.LongAdder;

/**
 * Binds what the object store counts to its L1 meters ({@link L1Catalogue}, LMCache's names): the store owns the counts, so it
 * binds them. Every supplier bound here is read by a scrape, on lmcache-http-*; they read counters and O(1) fields only.
 */
public final class StoreMeters {
    private StoreMeters() {}

    public static void bind(ServerMetrics metrics, ObjectStore store) {
        StoreCounters c = store.counters();
        // runs on: lmcache-http-* (each scrape), as every supplier below
        adder(metrics, L1Catalogue.WRITE_CHUNKS, c.writeChunks);
        adder(metrics, L1Catalogue.READ_CHUNKS, c.readChunks);
        adder(metrics, L1Catalogue.WRITE_BYTES, c.writeBytes);
        adder(metrics, L1Catalogue.READ_BYTES, c.readBytes);
        for (EvictionReason reason : EvictionReason.values()) {
            metrics.functionCounter(L1Catalogue.EVICTED_CHUNKS, c, counters -> counters.evictions(reason), reason.label());
            metrics.functionCounter(L1Catalogue.EVICTED_BYTES, c, counters -> counters.evictedBytes(reason), reason.label());
        }
        adder(metrics, L1Catalogue.EVICTION_LOOP_TICKS, c.evictionLoopTicks);
        adder(metrics, L1Catalogue.EVICTION_LOOP_TRIGGERED, c.evictionLoopTriggered);
        adder(metrics, L1Catalogue.EVICTION_FAILURES, c.evictionFailures);
        // LMCache's l1_allocation_failure_chunks{during, model_name}: made at the first failure of a model (the names are not known before)
        // runs on: the thread that reserved (a transfer lane, the CPU pool, lmcache-l2), under the object store's lock
        c.onAllocationFailure((during, model) -> metrics.declare(L1Catalogue.ALLOCATION_FAILURE_CHUNKS, during,
                metrics.label("model_name", model)).increment());
        c.lifecycle().sink(new LifecycleSink(new LifecycleMetrics(metrics)));
        adder(metrics, L1Catalogue.LOCK_EXPIRIES, c.readLockExpiries, "read");
        adder(metrics, L1Catalogue.LOCK_EXPIRIES, c.writeLockExpiries, "write");
        adder(metrics, L1Catalogue.FORMAT_MISMATCHES, c.formatMismatches);
        adder(metrics, L1Catalogue.READS_AFTER_WRITES, c.readsAfterWrites);
        adder(metrics, L1Catalogue.LOOKUPS_AFTER_WRITES, c.lookupsAfterWrites);
        adder(metrics, L1Catalogue.LOOKUP_WATCHES_REFUSED, c.lookupWatchesRefused);
        adder(metrics, L1Catalogue.READ_SHARE_MISSES, c.readShareMisses);
        metrics.onReset(c::reset);
        // O(1) fields published by the store: a scrape never waits on the lock inline LOOKUPs take
        metrics.gauge(L1Catalogue.MEMORY_USAGE_BYTES, store::usedBytes);
        metrics.gauge(L1Catalogue.MEMORY_TOTAL_BYTES, store::poolBytes);
        metrics.gauge(L1Catalogue.MEMORY_READY_BYTES, store::readyBytes);
        metrics.gauge(L1Catalogue.USAGE_RATIO, store::usageRatio);
        metrics.gauge(L1Catalogue.OBJECTS, store::objectCount);
    }

    private static void adder(ServerMetrics metrics, L1Catalogue entry, LongAdder adder, String... labelValues) {
        metrics.functionCounter(entry, adder, LongAdder::sum, labelValues);
    }

    /** The lifecycle sampler's samples into the histograms (metrics/ knows nothing of the store). */
    private record LifecycleSink(LifecycleMetrics histograms) implements ChunkLifecycle.Sink {
        @Override
        public void lifetime(long ns) {
            histograms.lifetime(ns);
        }

        @Override
        public void idleBeforeEvict(long ns) {
            histograms.idleBeforeEvict(ns);
        }

        @Override
        public void reuseGap(long ns) {
            histograms.reuseGap(ns);
        }

        @Override
        public void evictReuseGap(long ns) {
            histograms.evictReuseGap(ns);
        }

        @Override
        public void realReuseGap(String salt, long ns, long accesses) {
            histograms.realReuseGap(salt, ns, accesses);
        }
    }
}
