package io.lmcache.server.storage;

import java.util.concurrent.atomic.LongAdder;
import java.util.function.BiConsumer;
import java.util.function.LongSupplier;

/** What the L1 tier counts; the metrics layer exports these under LMCache's names. */
public final class StoreCounters {
    /** Why an object left the pool. */
    public enum EvictionReason {
        /** The background controller, above the trigger watermark. */
        WATERMARK("watermark"),
        /** Inside an allocation that found the pool full. */
        DEMAND("demand"),
        /** CLEAR or /cache/clear. */
        CLEAR("clear"),
        /** A write lock left by a client that never finished, reclaimed at its TTL. */
        EXPIRED_WRITE("expired_write"),
        /** The writer gave up (copy failed, worker gone). */
        ABORTED_WRITE("aborted_write"),
        /** Loaded from L2 for a lookup and released by its last reader. */
        PREFETCH_RELEASED("prefetch_released"),
        /** Written to every L2 adapter under {@code --l2-store-policy skip_l1}. */
        MOVED_TO_L2("moved_to_l2"),
        /** A STORE of another layout (dtype, backend, block size) for the same key replaced it. */
        REPLACED_LAYOUT("replaced_layout");

        private final String label;

        EvictionReason(String label) {
            this.label = label;
        }

        public String label() {
            return label;
        }
    }

    /** LMCache's {@code during} of an allocation failure: a STORE's objects. */
    public static final String DURING_L1_STORE = "l1_store";
    /** LMCache's {@code during} of an allocation failure: the objects an L2 prefetch loads into. */
    public static final String DURING_L2_PREFETCH = "l2_prefetch";

    public final LongAdder writeChunks = new LongAdder();
    public final LongAdder writeBytes = new LongAdder();
    public final LongAdder readChunks = new LongAdder();
    public final LongAdder readBytes = new LongAdder();
    public final LongAdder allocationFailures = new LongAdder();
    public final LongAdder readLockExpiries = new LongAdder();
    public final LongAdder writeLockExpiries = new LongAdder();
    public final LongAdder formatMismatches = new LongAdder();
    /** Reads (RETRIEVE pins) that met a chunk still being written and waited for its write to end. */
    public final LongAdder readsAfterWrites = new LongAdder();
    /** Lookup passes that met chunks still being written and were left pending until those writes ended. */
    public final LongAdder lookupsAfterWrites = new LongAdder();
    /** Chunks being written that a lookup counted as misses because too many lookups wait on fills already. */
    public final LongAdder lookupWatchesRefused = new LongAdder();
    /** Chunks a lookup counted as misses because its tenant's read locks held their share of the pool. */
    public final LongAdder readShareMisses = new LongAdder();
    public final LongAdder evictionFailures = new LongAdder();
    public final LongAdder evictionLoopTicks = new LongAdder();
    public final LongAdder evictionLoopTriggered = new LongAdder();
    private final LongAdder[] evictions = new LongAdder[EvictionReason.values().length];
    private final LongAdder[] evictedBytes = new LongAdder[EvictionReason.values().length];
    private final ChunkLifecycle lifecycle;
    /** Told of each allocation failure with who asked and the chunk's model (LMCache's during and model_name); set once, before traffic. */
    private volatile BiConsumer<String, String> allocationFailureListener = (during, model) -> { };

    public StoreCounters() {
        this(System::nanoTime);
    }

    /** With the chunk lifecycle's clock given (tests). */
    StoreCounters(LongSupplier lifecycleClockNs) {
        lifecycle = new ChunkLifecycle(lifecycleClockNs);
        for (int i = 0; i < evictions.length; i++) {
            evictions[i] = new LongAdder();
            evictedBytes[i] = new LongAdder();
        }
    }

    void evicted(EvictionReason reason, long bytes) {
        evictions[reason.ordinal()].increment();
        evictedBytes[reason.ordinal()].add(bytes);
    }

    /** A chunk of {@code model} found no room in L1; {@code during} says who asked ({@link #DURING_L1_STORE}, ...). */
    void allocationFailed(String during, String model) {
        allocationFailures.increment();
        allocationFailureListener.accept(during, model);
    }

    /** {@code listener} gets (during, model) of each failure. */
    public void onAllocationFailure(BiConsumer<String, String> listener) {
        allocationFailureListener = listener;
    }

    /** The sampled chunk lifecycle (its histograms are LMCache's l1_chunk_* series). */
    public ChunkLifecycle lifecycle() {
        return lifecycle;
    }

    public long evictions(EvictionReason reason) {
        return evictions[reason.ordinal()].sum();
    }

    public long evictedBytes(EvictionReason reason) {
        return evictedBytes[reason.ordinal()].sum();
    }

    /** Zeroes every counter (HTTP /metrics/reset). */
    public void reset() {
        for (LongAdder adder : new LongAdder[] {writeChunks, writeBytes, readChunks, readBytes, allocationFailures,
            readLockExpiries, writeLockExpiries, formatMismatches, readsAfterWrites, lookupsAfterWrites, lookupWatchesRefused, readShareMisses,
            evictionFailures, evictionLoopTicks, evictionLoopTriggered}) {
            adder.reset();
        }
        for (int i = 0; i < evictions.length; i++) {
            evictions[i].reset();
            evictedBytes[i].reset();
        }
    }
}
