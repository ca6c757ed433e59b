package io.lmcache.server.storage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.config.EvictionPolicyName;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A randomized mix of reserve, commit, abort, pin, unpin, lookup-lock, release, expiry, eviction and
 * clear from 4 threads (fixed seeds), with the store's invariants checked after every step: no two
 * live objects overlap, used bytes are exactly the live objects' slots, nothing is lost or freed
 * twice (the allocator refuses a double free), LRU membership matches lock state, and the O(1)
 * counts the store publishes (objects, locks, pins, evictable, bytes) equal a full recount; the
 * eviction policy's own invariant (lists, counts, ghosts, tenants) is part of that audit. Run over
 * every policy.
 */
class ObjectStoreConcurrencyTest {
    private static final long KIB = 1024;
    private static final int THREADS = 4;
    private static final int OPS_PER_THREAD = 30_000;
    private static final long[] SIZES = {64 * KIB, 200 * KIB, 1024 * KIB};

    @ParameterizedTest
    @EnumSource(EvictionPolicyName.class)
    void invariantsHoldUnderARandomMix(EvictionPolicyName policy) throws Exception {
        AtomicLong nowNs = new AtomicLong();
        long pool = 32L << 20;
        StoreCounters counters = new StoreCounters();
        ObjectStore store = ReadyStores.of(pool, 4L << 20, policy, 5_000, 3_000, nowNs::get, counters);
        // IsolatedLRU: one tenant with a quota it exceeds, so both of its victim paths run
        store.setTenantQuota("tenant", 4L << 20);
        CyclicBarrier start = new CyclicBarrier(THREADS);
        ExecutorService pool4 = Executors.newFixedThreadPool(THREADS);
        List<Future<Integer>> results = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            int thread = t;
            results.add(pool4.submit(() -> {
                start.await();
                return run(store, nowNs, new Random(1000 + thread), thread);
            }));
        }
        int ops = 0;
        for (Future<Integer> result : results) {
            ops += result.get();
        }
        pool4.shutdown();
        assertTrue(ops >= 100_000, "ran " + ops + " operations");
        store.checkInvariants();
        assertTrue(counters.writeChunks.sum() > 1000, "objects were written: " + counters.writeChunks.sum());
        if (policy == EvictionPolicyName.NOOP) {
            assertEquals(0, counters.evictions(StoreCounters.EvictionReason.DEMAND), "noop never evicts");
            assertTrue(counters.allocationFailures.sum() > 100, "the full pool refused stores instead");
        } else {
            assertTrue(counters.evictions(StoreCounters.EvictionReason.DEMAND) > 100, "the pool filled and evicted on demand");
        }
        assertTrue(counters.readLockExpiries.sum() + counters.writeLockExpiries.sum() > 0, "locks expired");
        // everything released: nothing may stay locked or leak
        nowNs.addAndGet(1_000_000);
        store.sweepExpired();
        store.clear(true);
        store.checkInvariants();
        assertEquals(0, store.snapshot().usedBytes());
    }

    private static int run(ObjectStore store, AtomicLong nowNs, Random random, int thread) {
        List<StoredObject> writing = new ArrayList<>();
        List<StoredObject> pinned = new ArrayList<>();
        List<ObjectStore.ReadLock> locks = new ArrayList<>();
        for (int op = 0; op < OPS_PER_THREAD; op++) {
            long hash = random.nextInt(400);
            long size = SIZES[(int) (hash % SIZES.length)];
            String salt = (hash & 1) == 0 ? "" : "tenant";
            switch (random.nextInt(12)) {
                case 0, 1, 2 -> {
                    StoredObject object = store.reserve(ChunkKey.of("model", salt, thread % 2, 0, hash, ~hash), size, 1);
                    if (object.offset() >= 0) {
                        writing.add(object);
                    }
                }
                case 3, 4 -> {
                    if (!writing.isEmpty()) {
                        store.commit(writing.remove(random.nextInt(writing.size())));
                    }
                }
                case 5 -> {
                    if (!writing.isEmpty()) {
                        store.abort(writing.remove(random.nextInt(writing.size())));
                    }
                }
                case 6 -> {
                    StoredObject object = store.pinReady(ChunkKey.of("model", salt, random.nextInt(2), 0, hash, ~hash), size, 1);
                    if (object != null) {
                        pinned.add(object);
                    }
                }
                case 7 -> {
                    if (!pinned.isEmpty()) {
                        store.unpin(pinned.remove(random.nextInt(pinned.size())), random.nextBoolean());
                    }
                }
                case 8 -> store.lookupAndLock(PrefixKeys.ofWords("model", salt, 1, 0, hash, ~hash), 0, 1, 1 + random.nextInt(2), locks, null);
                case 9 -> {
                    if (!locks.isEmpty()) {
                        store.releaseRead(locks.remove(random.nextInt(locks.size())), 1 + random.nextInt(2));
                    }
                }
                case 10 -> {
                    nowNs.addAndGet(random.nextInt(500));
                    store.sweepExpired();
                }
                default -> {
                    if (random.nextInt(50) == 0) {
                        store.clear(random.nextInt(4) == 0);
                    } else {
                        store.evict(random.nextInt(3) * size, StoreCounters.EvictionReason.WATERMARK);
                    }
                }
            }
            store.checkInvariants();
        }
        for (StoredObject object : writing) {
            store.commit(object);
        }
        for (StoredObject object : pinned) {
            store.unpin(object, false);
        }
        for (ObjectStore.ReadLock lock : locks) {
            store.releaseRead(lock, 2);
        }
        return OPS_PER_THREAD;
    }
}
