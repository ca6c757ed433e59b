package io.lmcache.server.tier;

import io.lmcache.server.metrics.L2Metrics;
import io.lmcache.server.protocol.CacheKey;

/**
 * The metering of one prefetch, on lmcache-l2: its lookup, and its loads per adapter. A load enters the in-flight
 * gauges ({@code num_inflight_l2_loads}, {@code inflight_load_memory_usage_bytes}) when submitted
 * and leaves them exactly once however it ends: answered in time, answered late after the
 * prefetch's deadline, or abandoned at shutdown. An answered load also counts its task, the bytes
 * it loaded and one throughput sample, submit to answer.
 */
final class PrefetchMeter {
    private final L2Metrics metrics;
    private final long[] reservedBytes;
    private final long[] submittedNs;
    private final long[] answeredNs;
    private final boolean[] inFlight;

    PrefetchMeter(L2Metrics metrics, int adapters) {
        this.metrics = metrics;
        this.reservedBytes = new long[adapters];
        this.submittedNs = new long[adapters];
        this.answeredNs = new long[adapters];
        this.inFlight = new boolean[adapters];
    }

    /** The LOOKUP of {@code key} asks the adapters for {@code keys} objects. */
    void lookingUp(CacheKey key, int keys) {
        metrics.prefetchLookups.increment();
        metrics.prefetchLookupObjects.add(key.cacheSalt(), keys);
        // the failure series of this model exist from its first prefetch on, at zero until a load fails
        metrics.prefetchL1Oom.declare(key.modelName());
        metrics.prefetchNotFound.declare(key.modelName());
    }

    /** Adapter {@code a}'s load of {@code objects} objects is about to be submitted, into {@code bytes} of reserved L1 objects. */
    void submitting(int a, CacheKey key, int objects, long bytes) {
        metrics.loadSubmitted.increment();
        metrics.loadSubmittedObjects.add(key.cacheSalt(), objects);
        L2Metrics.Adapter counters = metrics.adapter(a);
        reservedBytes[a] = bytes;
        counters.inflightLoadBytes().addAndGet(bytes);
        counters.inflightLoads().incrementAndGet();
        inFlight[a] = true;
        submittedNs[a] = System.nanoTime();
    }

    /** Adapter {@code a}'s load result arrived (the throughput's end). */
    void answered(int a) {
        answeredNs[a] = System.nanoTime();
    }

    /** Whether adapter {@code a}'s load is still in the gauges. */
    boolean inFlight(int a) {
        return inFlight[a];
    }

    /** Adapter {@code a}'s answered load, which filled {@code loadedBytes}: out of the gauges and counted, once. */
    void counted(int a, long loadedBytes) {
        if (leave(a)) {
            L2Metrics.Adapter counters = metrics.adapter(a);
            counters.loadCompleted().increment();
            counters.loadBytes().add(loadedBytes);
            counters.loadThroughput().record(loadedBytes, answeredNs[a] - submittedNs[a]);
        }
    }

    /** Every load answered in time: {@code published} objects reached L1, {@code notFound} failed to load. */
    void loadsFinished(CacheKey key, int published, int notFound) {
        metrics.loadCompletedObjects.add(key.cacheSalt(), published);
        metrics.prefetchNotFound.add(key.modelName(), notFound);
    }

    /** Shutdown: every load not counted yet leaves the gauges uncounted. */
    void abandoned() {
        for (int a = 0; a < inFlight.length; a++) {
            leave(a);
        }
    }

    private boolean leave(int a) {
        if (!inFlight[a]) {
            return false;
        }
        inFlight[a] = false;
        L2Metrics.Adapter counters = metrics.adapter(a);
        counters.inflightLoads().decrementAndGet();
        counters.inflightLoadBytes().addAndGet(-reservedBytes[a]);
        return true;
    }
}
