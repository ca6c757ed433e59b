package io.lmcache.server.storage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.config.EvictionPolicyName;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** The sampled chunk lifecycle as the object store feeds it: stores, reads, evictions, and stores of evicted chunks. */
class ChunkLifecycleTest {
    private static final long MIB = 1 << 20;
    private final AtomicLong nowNs = new AtomicLong(TimeUnit.SECONDS.toNanos(1));
    private final List<String> samples = new ArrayList<>();

    private ObjectStore store(StoreCounters counters) {
        SlabAllocator allocator = new SlabAllocator(4 * MIB, 4 * MIB);
        ObjectStore store = new ObjectStore(allocator, 4 * MIB, EvictionPolicyName.LRU, TimeUnit.SECONDS.toNanos(600), TimeUnit.SECONDS.toNanos(300),
                nowNs::get, counters);
        store.addReadyRegion(0);
        counters.lifecycle().sink(new ChunkLifecycle.Sink() {
            @Override
            public void lifetime(long ns) {
                samples.add("lifetime " + seconds(ns));
            }

            @Override
            public void idleBeforeEvict(long ns) {
                samples.add("idle " + seconds(ns));
            }

            @Override
            public void reuseGap(long ns) {
                samples.add("reuse " + seconds(ns));
            }

            @Override
            public void evictReuseGap(long ns) {
                samples.add("evict-reuse " + seconds(ns));
            }

            @Override
            public void realReuseGap(String salt, long ns, long accesses) {
                samples.add("real '" + salt + "' " + seconds(ns) + " " + accesses);
            }
        });
        return store;
    }

    private static long seconds(long ns) {
        return TimeUnit.NANOSECONDS.toSeconds(ns);
    }

    private void at(long seconds) {
        nowNs.set(TimeUnit.SECONDS.toNanos(seconds));
    }

    private static void put(ObjectStore store, long hash) {
        StoredObject object = store.reserve(ChunkKey.of("m", "tenant", 0, 0, hash, hash), MIB, 1);
        assertTrue(object.offset() >= 0, "reserved " + hash);
        assertTrue(store.commit(object));
    }

    private static void read(ObjectStore store, long hash) {
        StoredObject object = store.pinReady(ChunkKey.of("m", "tenant", 0, 0, hash, hash), MIB, 1);
        store.unpin(object, true);
    }

    @Test
    void lifetimeIdleTimeAndReuseGapsOfSampledChunks() {
        StoreCounters counters = new StoreCounters(nowNs::get);
        counters.lifecycle().sampleRate(1);
        ObjectStore store = store(counters);
        at(1);
        for (long hash = 1; hash <= 4; hash++) {
            put(store, hash);
        }
        at(3);
        read(store, 1);
        assertEquals(List.of("reuse 2", "real 'tenant' 2 3"), samples, "2 s since its store; 3 other chunks of its salt touched since");
        samples.clear();
        at(10);
        put(store, 5);
        assertEquals(List.of("lifetime 9", "idle 9"), samples, "the pool was full: the least recently used chunk (2) was evicted");
        samples.clear();
        at(12);
        put(store, 2);
        assertEquals(List.of("lifetime 11", "idle 11", "evict-reuse 2"), samples, "3 goes to make room; 2 comes back 2 s after its eviction");
        samples.clear();
        store.clear(true);
        assertEquals(List.of(), samples, "a clear is not an eviction");
        assertEquals(0, counters.lifecycle().followed());
    }

    @Test
    void onlyTheSampledShareOfChunksIsFollowedAndTheCountersCountEveryChunk() {
        StoreCounters counters = new StoreCounters(nowNs::get);
        counters.lifecycle().sampleRate(0.5);
        ObjectStore store = store(counters);
        put(store, 1);
        put(store, 0xFFFFF);
        assertEquals(1, counters.lifecycle().followed(), "hash 1 is in the sampled half, 0xFFFFF is not");
        read(store, 0xFFFFF);
        assertEquals(List.of(), samples);
        assertEquals(1, counters.readChunks.sum());
        StoreCounters allFailures = new StoreCounters(nowNs::get);
        List<String> models = new ArrayList<>();
        allFailures.onAllocationFailure((during, model) -> models.add(during + " " + model));
        ObjectStore full = new ObjectStore(new SlabAllocator(4 * MIB, 4 * MIB), 4 * MIB, EvictionPolicyName.NOOP, 1, 1, nowNs::get, allFailures);
        full.addReadyRegion(0);
        for (long hash = 1; hash <= 4; hash++) {
            assertTrue(full.commit(full.reserve(ChunkKey.of("llama", "", 0, 0, hash, hash), MIB, 1)));
        }
        assertSame(ObjectStore.NO_MEMORY, full.reserve(ChunkKey.of("llama", "", 0, 0, 9, 9), MIB, 1));
        assertEquals(List.of("l1_store llama"), models, "the failure names who asked and its model (LMCache's during and model_name)");
        assertEquals(1, allFailures.allocationFailures.sum());
    }
}
