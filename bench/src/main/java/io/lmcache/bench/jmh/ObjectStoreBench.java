package io.lmcache.bench.jmh;

import io.lmcache.server.config.EvictionPolicyName;
import io.lmcache.server.storage.ChunkKey;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.SlabAllocator;
import io.lmcache.server.storage.StoreCounters;
import io.lmcache.server.storage.StoreCounters.EvictionReason;
import io.lmcache.server.storage.StoredObject;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Storing a new chunk object into a FULL pool under LRU: {@code reserve} (which evicts on demand)
 * then {@code commit}, as a STORE does per chunk. Pool bookkeeping only, no data copied.
 *
 * <p>(b) {@link #sameClass}: every object is 32 MiB in 384 MiB regions, so each reservation evicts
 * exactly one object, the LRU tail, and reuses its slot.
 *
 * <p>(c) {@link #otherClass}: the victim is always of another size class, so its whole region is
 * drained and handed to the new class. Objects come in runs of {@code objectsPerRegion} of one
 * class (a region's worth), alternating between two classes (slots of region/k and region/k − 4
 * KiB), over an odd number of regions: the LRU tail is then always the other class. With k = 1
 * every call drains a one-object region; with k = 12 the first call of each run drains a region of
 * twelve objects and the other eleven fill the drained region without evicting, so percentiles
 * above p91 are the drain and the mean is the cost per stored object.
 *
 * <p>Each trial checks at its end that it measured what it says (evictions per call, invariants).
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgs = {"-Xms512m", "-Xmx512m"})
public class ObjectStoreBench {
    static final long REGION_BYTES = 384L << 20;
    static final String MODEL = "meta-llama/Llama-3.1-8B-Instruct";
    static final int FORMAT = 1;

    /** A full store and the key counter; {@link #store} makes each new key distinct. */
    abstract static class FullStore {
        SlabAllocator allocator;
        ObjectStore store;
        StoreCounters counters;
        long next;
        long evictionsAtStart;
        long callsAtStart;

        void create(int regions) {
            allocator = new SlabAllocator(regions * REGION_BYTES, REGION_BYTES);
            counters = new StoreCounters();
            store = new ObjectStore(allocator, regions * REGION_BYTES, EvictionPolicyName.LRU, TimeUnit.SECONDS.toNanos(600),
                    TimeUnit.SECONDS.toNanos(300), System::nanoTime, counters);
            for (int region = 0; region < regions; region++) {
                store.addReadyRegion(region);
            }
        }

        StoredObject store(long bytes) {
            long n = next++;
            StoredObject object = store.reserve(ChunkKey.of(MODEL, "", 0, 0, n, n * 0x9E3779B97F4A7C15L), bytes, FORMAT);
            if (object == ObjectStore.NO_MEMORY || object == ObjectStore.EXISTS) {
                throw new IllegalStateException("reserve of object " + n + " failed");
            }
            store.commit(object);
            return object;
        }

        void markStart() {
            evictionsAtStart = counters.evictions(EvictionReason.DEMAND);
            callsAtStart = next;
        }

        /** Demand evictions per call since {@link #markStart}, with the store's invariants checked. */
        double evictionsPerCall() {
            store.checkInvariants();
            return (double) (counters.evictions(EvictionReason.DEMAND) - evictionsAtStart) / (next - callsAtStart);
        }
    }

    @State(Scope.Thread)
    public static class SameClassPool extends FullStore {
        static final long OBJECT_BYTES = 32L << 20;

        @Setup
        public void setUp() {
            create(16);
            while (allocator.hasRoomFor(OBJECT_BYTES)) {
                store(OBJECT_BYTES);
            }
            markStart();
        }

        @TearDown
        public void check() {
            double perCall = evictionsPerCall();
            if (perCall != 1.0) {
                throw new IllegalStateException("expected one eviction per call, got " + perCall);
            }
        }
    }

    @State(Scope.Thread)
    public static class AlternatingPool extends FullStore {
        static final int REGIONS = 15; // odd: the LRU tail's run is always of the other class

        @Param({"1", "12"})
        public int objectsPerRegion;
        long[] classBytes;

        @Setup
        public void setUp() {
            classBytes = new long[] {REGION_BYTES / objectsPerRegion, REGION_BYTES / objectsPerRegion - SlabAllocator.ALIGN_BYTES};
            create(REGIONS);
            for (int i = 0; i < REGIONS * objectsPerRegion; i++) {
                store(nextBytes());
            }
            if (allocator.freeRegions() != 0 || allocator.hasRoomFor(classBytes[0]) || allocator.hasRoomFor(classBytes[1])) {
                throw new IllegalStateException("the pool is not full after the fill");
            }
            markStart();
        }

        long nextBytes() {
            return classBytes[(int) (next / objectsPerRegion) & 1];
        }

        @TearDown
        public void check() {
            double perCall = evictionsPerCall();
            // runs cut by the end of the trial leave at most one run's difference
            if (Math.abs(perCall - 1.0) * (next - callsAtStart) > objectsPerRegion) {
                throw new IllegalStateException("expected one eviction per call on average, got " + perCall);
            }
        }
    }

    @Benchmark
    public StoredObject sameClass(SameClassPool pool) {
        return pool.store(SameClassPool.OBJECT_BYTES);
    }

    @Benchmark
    public StoredObject otherClass(AlternatingPool pool) {
        return pool.store(pool.nextBytes());
    }
}
