package io.lmcache.server.storage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.config.EvictionPolicyName;
import io.lmcache.server.storage.StoreCounters.EvictionReason;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** The store's behaviour, each policy-independent case run over every eviction policy (Caffeine's way). */
class ObjectStoreTest {
    private static final long MIB = 1 << 20;
    private static final long WRITE_TTL_NS = TimeUnit.SECONDS.toNanos(600);
    private static final long READ_TTL_NS = TimeUnit.SECONDS.toNanos(300);

    private final AtomicLong nowNs = new AtomicLong(1_000_000_000L);

    private ObjectStore store(long pool, long region, EvictionPolicyName policy) {
        return ReadyStores.of(pool, region, policy, WRITE_TTL_NS, READ_TTL_NS, nowNs::get, new StoreCounters());
    }

    private static StoredObject put(ObjectStore store, long hash, long bytes) {
        StoredObject object = store.reserve(ChunkKey.of("m", "", 0, 0, hash, hash), bytes, 1);
        assertTrue(object.offset() >= 0, "reserved " + hash);
        assertTrue(store.commit(object));
        return object;
    }

    private static boolean present(ObjectStore store, long hash, long bytes) {
        StoredObject object = store.pinReady(ChunkKey.of("m", "", 0, 0, hash, hash), bytes, 1);
        if (object == null) {
            return false;
        }
        store.unpin(object, false);
        return true;
    }

    @ParameterizedTest
    @EnumSource(EvictionPolicyName.class)
    void reserveCommitPinAndExisting(EvictionPolicyName policy) {
        ObjectStore store = store(16 * MIB, 16 * MIB, policy);
        StoredObject object = store.reserve(ChunkKey.of("m", "", 0, 0, 1, 1), MIB, 1);
        assertNull(store.pinReady(ChunkKey.of("m", "", 0, 0, 1, 1), MIB, 1), "a WRITING object is invisible");
        assertSame(ObjectStore.EXISTS, store.reserve(ChunkKey.of("m", "", 0, 0, 1, 1), MIB, 1), "and cannot be reserved twice");
        assertTrue(store.commit(object));
        assertTrue(present(store, 1, MIB));
        assertSame(ObjectStore.EXISTS, store.reserve(ChunkKey.of("m", "", 0, 0, 1, 1), MIB, 1));
        assertNull(store.pinReady(ChunkKey.of("m", "", 0, 0, 1, 1), MIB, 2), "another layout's reader gets a miss");
        assertEquals(1, store.counters().formatMismatches.sum());
        assertNull(store.pinReady(ChunkKey.of("m", "salt", 0, 0, 1, 1), MIB, 1), "the cache salt isolates");
        assertNull(store.pinReady(ChunkKey.of("m", "", 1, 0, 1, 1), MIB, 1), "another kv rank");
        store.checkInvariants();
    }

    @ParameterizedTest
    @EnumSource(value = EvictionPolicyName.class, names = "NOOP", mode = EnumSource.Mode.EXCLUDE)
    void lruByBytesEvictsTailChunksOfAPrefixFirst(EvictionPolicyName policy) {
        ObjectStore store = store(8 * MIB, 8 * MIB, policy);
        // a 4-chunk prefix committed last chunk first, as the transfer module does
        List<StoredObject> reserved = new ArrayList<>();
        for (long chunk = 0; chunk < 4; chunk++) {
            reserved.add(store.reserve(ChunkKey.of("m", "", 0, 0, chunk, chunk), 2 * MIB, 1));
        }
        for (int i = reserved.size() - 1; i >= 0; i--) {
            store.commit(reserved.get(i));
        }
        StoredObject fifth = store.reserve(ChunkKey.of("m", "", 0, 0, 9, 9), 2 * MIB, 1);
        assertTrue(fifth.offset() >= 0, "a full pool evicts on demand");
        store.commit(fifth);
        assertFalse(present(store, 3, 2 * MIB), "the tail chunk went first");
        assertTrue(present(store, 0, 2 * MIB) && present(store, 1, 2 * MIB) && present(store, 2, 2 * MIB));
        assertEquals(1, store.counters().evictions(EvictionReason.DEMAND));
        store.checkInvariants();
    }

    @ParameterizedTest
    @EnumSource(value = EvictionPolicyName.class, names = "NOOP", mode = EnumSource.Mode.EXCLUDE)
    void aWatermarkPassLargerThanOneBatchFreesExactlyItsTargetOldestFirst(EvictionPolicyName policy) {
        int objects = 3 * ObjectStore.EVICTION_BATCH + 17;
        long bytes = 64 * 1024;
        ObjectStore store = store(objects * bytes, objects * bytes, policy);
        for (long hash = 0; hash < objects; hash++) {
            put(store, hash, bytes);
        }
        int first = 2 * ObjectStore.EVICTION_BATCH + 5;
        nowNs.addAndGet(ArcPolicy.YOUNG_FLOOR_NS); // past ARC's floor: a background pass spares younger objects
        assertEquals(first * bytes, store.evict(first * bytes, EvictionReason.WATERMARK));
        assertFalse(present(store, first - 1, bytes), "the oldest went");
        assertTrue(present(store, first, bytes), "the newer stayed");
        store.checkInvariants();
        // a target beyond what is left frees everything evictable and stops
        assertEquals((objects - first) * bytes, store.evict(objects * bytes, EvictionReason.WATERMARK));
        assertEquals(objects, store.counters().evictions(EvictionReason.WATERMARK));
        assertEquals(0, store.snapshot().objects());
        store.checkInvariants();
    }

    @ParameterizedTest
    @EnumSource(value = EvictionPolicyName.class, names = "NOOP", mode = EnumSource.Mode.EXCLUDE)
    void lockedAndPinnedObjectsAreNeverVictims(EvictionPolicyName policy) {
        ObjectStore store = store(4 * MIB, 4 * MIB, policy);
        put(store, 1, 2 * MIB);
        put(store, 2, 2 * MIB);
        List<ObjectStore.ReadLock> locks = new ArrayList<>();
        assertEquals(1, store.lookupAndLock(PrefixKeys.ofWords("m", "", 1, 0, 1, 1), 0, 1, 1, locks, null));
        StoredObject pinned = store.pinReady(ChunkKey.of("m", "", 0, 0, 2, 2), 2 * MIB, 1);
        assertSame(ObjectStore.NO_MEMORY, store.reserve(ChunkKey.of("m", "", 0, 0, 3, 3), 2 * MIB, 1), "everything is locked");
        assertEquals(1, store.counters().allocationFailures.sum());
        store.unpin(pinned, true);
        assertTrue(store.reserve(ChunkKey.of("m", "", 0, 0, 3, 3), 2 * MIB, 1).offset() >= 0, "the unpinned one went");
        assertTrue(present(store, 1, 2 * MIB), "the read-locked one survived");
        store.checkInvariants();
    }

    @ParameterizedTest
    @EnumSource(EvictionPolicyName.class)
    void expiredReadLocksAreReclaimedAndStaleReleasesIgnored(EvictionPolicyName policy) {
        ObjectStore store = store(4 * MIB, 4 * MIB, policy);
        put(store, 1, 2 * MIB);
        List<ObjectStore.ReadLock> locks = new ArrayList<>();
        store.lookupAndLock(PrefixKeys.ofWords("m", "", 1, 0, 1, 1), 0, 1, 2, locks, null);
        assertEquals(1, store.snapshot().readLocked());
        nowNs.addAndGet(READ_TTL_NS + 1);
        assertEquals(1, store.sweepExpired());
        assertEquals(0, store.snapshot().readLocked());
        assertEquals(1, store.counters().readLockExpiries.sum());
        // a new lock after the expiry; the old lease's release must not take it
        List<ObjectStore.ReadLock> fresh = new ArrayList<>();
        store.lookupAndLock(PrefixKeys.ofWords("m", "", 1, 0, 1, 1), 0, 1, 1, fresh, null);
        store.releaseRead(locks.getFirst(), 2);
        assertEquals(1, store.snapshot().readLocked(), "a stale release does nothing");
        store.releaseRead(fresh.getFirst(), 1);
        assertEquals(0, store.snapshot().readLocked());
        store.checkInvariants();
    }

    @ParameterizedTest
    @EnumSource(EvictionPolicyName.class)
    void anAbandonedWriteIsReclaimedAtItsTtl(EvictionPolicyName policy) {
        ObjectStore store = store(4 * MIB, 4 * MIB, policy);
        // an engine-driven worker's reservation: it fills the pool itself and may be gone
        StoredObject abandoned = store.reserveExternal(ChunkKey.of("m", "", 0, 0, 1, 1), 2 * MIB, 1);
        nowNs.addAndGet(WRITE_TTL_NS - 1);
        assertEquals(0, store.sweepExpired());
        nowNs.addAndGet(2);
        assertEquals(1, store.sweepExpired());
        assertEquals(1, store.counters().writeLockExpiries.sum());
        assertEquals(0, store.snapshot().usedBytes());
        assertFalse(store.commit(abandoned), "a late commit finds its object gone");
        assertTrue(store.reserve(ChunkKey.of("m", "", 0, 0, 1, 1), 2 * MIB, 1).offset() >= 0, "the key can be stored again");
        store.checkInvariants();
    }

    /**
     * An engine-driven reservation (another process fills it, and may die): a lookup counts it as a miss at once, never as a
     * write to wait for (LMCache's staging objects are unreadable), and a read does not wait for it either.
     */
    @ParameterizedTest
    @EnumSource(EvictionPolicyName.class)
    void anExternalReservationIsAMissNotAPendingWrite(EvictionPolicyName policy) {
        ObjectStore store = store(16 * MIB, 16 * MIB, policy);
        StoredObject reserved = store.reserveExternal(ChunkKey.of("m", "", 0, 0, 1, 1), MIB, 1);
        PendingFills fills = new PendingFills();
        assertEquals(0, store.lookupAndLock(PrefixKeys.ofWords("m", "", 1, 0, 1, 1), 0, 1, 1, new ArrayList<>(), fills));
        assertFalse(fills.any(), "not watched: the LOOKUP is answered at once");
        assertNull(store.pinReady(ChunkKey.of("m", "", 0, 0, 1, 1), MIB, 1, Long.MAX_VALUE), "a read does not wait for it");
        assertEquals(0, store.counters().readsAfterWrites.sum());
        // an own fill of the same kind is still a write to wait for
        StoredObject own = store.reserve(ChunkKey.of("m", "", 0, 0, 2, 2), MIB, 1);
        PendingFills ownFills = new PendingFills();
        assertEquals(1, store.lookupAndLock(PrefixKeys.ofWords("m", "", 1, 0, 2, 2), 0, 1, 1, new ArrayList<>(), ownFills));
        assertTrue(ownFills.any());
        assertTrue(store.commit(reserved));
        assertEquals(1, store.lookupAndLock(PrefixKeys.ofWords("m", "", 1, 0, 1, 1), 0, 1, 0, new ArrayList<>(), new PendingFills()),
                "committed: a hit");
        store.abort(own);
        store.checkInvariants();
    }

    /** A second writer's PREPARE_STORE supersedes an engine-driven reservation; the first writer's late commit answers false. */
    @ParameterizedTest
    @EnumSource(EvictionPolicyName.class)
    void anExternalReservationNeverBlocksAnotherWriter(EvictionPolicyName policy) {
        ObjectStore store = store(16 * MIB, 16 * MIB, policy);
        StoredObject first = store.reserveExternal(ChunkKey.of("m", "", 0, 0, 1, 1), MIB, 1);
        StoredObject second = store.reserveExternal(ChunkKey.of("m", "", 0, 0, 1, 1), MIB, 1);
        assertTrue(second.offset() >= 0 && second != first, "a fresh reservation, not EXISTS");
        assertEquals(2 * MIB, store.snapshot().usedBytes(), "the first one's memory stays its writer's until its end");
        assertTrue(store.commit(second));
        assertFalse(store.commit(first), "superseded");
        assertEquals(MIB, store.snapshot().usedBytes());
        assertTrue(present(store, 1, MIB));
        store.checkInvariants();
    }

    /** The owner's connection closed: the key is free at once, the memory only at the owner's abort (the reap) or TTL. */
    @ParameterizedTest
    @EnumSource(EvictionPolicyName.class)
    void aDisownedReservationFreesItsKeyAtOnceAndItsMemoryAtTheAbort(EvictionPolicyName policy) {
        ObjectStore store = store(16 * MIB, 16 * MIB, policy);
        StoredObject orphan = store.reserveExternal(ChunkKey.of("m", "", 0, 0, 1, 1), MIB, 1);
        store.disown(orphan);
        StoredObject gpuStore = store.reserve(ChunkKey.of("m", "", 0, 0, 1, 1), MIB, 1);
        assertTrue(gpuStore.offset() >= 0, "another writer may store the chunk");
        assertEquals(2 * MIB, store.snapshot().usedBytes());
        assertTrue(store.commit(gpuStore));
        store.abort(orphan);
        assertEquals(MIB, store.snapshot().usedBytes());
        assertTrue(present(store, 1, MIB), "the abort of the disowned reservation leaves the new object alone");
        // at the TTL instead of an abort
        StoredObject late = store.reserveExternal(ChunkKey.of("m", "", 0, 0, 3, 3), MIB, 1);
        store.disown(late);
        nowNs.addAndGet(WRITE_TTL_NS + 1);
        assertEquals(1, store.sweepExpired());
        assertEquals(MIB, store.snapshot().usedBytes());
        assertFalse(store.commit(late));
        store.checkInvariants();
    }

    /**
     * A fill of this process (a GPU copy, an L2 load) always ends in a commit or an abort, but may outlast the write TTL (an L2
     * read queued behind a long backlog). Its expiry hides the object and frees the key, but the memory stays the fill's until
     * that end: freed at once, another STORE got it and the late fill wrote into that STORE's object.
     */
    @ParameterizedTest
    @EnumSource(EvictionPolicyName.class)
    void anExpiredWriteOfOurOwnFillIsFreedOnlyWhenTheFillEnds(EvictionPolicyName policy) {
        ObjectStore store = store(4 * MIB, 4 * MIB, policy);
        StoredObject slow = store.reserve(ChunkKey.of("m", "", 0, 0, 1, 1), 4 * MIB, 1);
        nowNs.addAndGet(WRITE_TTL_NS + 1);
        assertEquals(1, store.sweepExpired());
        assertSame(ObjectStore.NO_MEMORY, store.reserve(ChunkKey.of("m", "", 0, 0, 1, 1), 4 * MIB, 1),
                "the key is free again, but the memory is still the slow fill's");
        assertEquals(4 * MIB, store.snapshot().usedBytes());
        assertFalse(store.commit(slow), "the late commit finds its object gone, and frees it");
        assertEquals(0, store.snapshot().usedBytes());
        StoredObject next = store.reserve(ChunkKey.of("m", "", 0, 0, 1, 1), 4 * MIB, 1);
        assertTrue(next.offset() >= 0, "now the key can be stored again");
        store.checkInvariants();
        // the same with an abort as the fill's end
        nowNs.addAndGet(WRITE_TTL_NS + 1);
        assertEquals(1, store.sweepExpired());
        store.abort(next);
        assertEquals(0, store.snapshot().usedBytes());
        store.checkInvariants();
    }

    /** An engine restarted with another dtype, backend or block size: its STORE replaces the old layout's unlocked object. */
    @ParameterizedTest
    @EnumSource(EvictionPolicyName.class)
    void aStoreOfAnotherLayoutReplacesAnUnlockedObject(EvictionPolicyName policy) {
        ObjectStore store = store(16 * MIB, 16 * MIB, policy);
        put(store, 1, MIB);
        StoredObject replacement = store.reserve(ChunkKey.of("m", "", 0, 0, 1, 1), MIB, 2);
        assertTrue(replacement.offset() >= 0, "the old format's object is replaced, not answered with EXISTS");
        assertEquals(1, store.counters().evictions(StoreCounters.EvictionReason.REPLACED_LAYOUT));
        assertTrue(store.commit(replacement));
        assertNull(store.pinReady(ChunkKey.of("m", "", 0, 0, 1, 1), MIB, 1), "the old layout is gone");
        StoredObject pinned = store.pinReady(ChunkKey.of("m", "", 0, 0, 1, 1), MIB, 2);
        assertNotNull(pinned);
        assertSame(ObjectStore.EXISTS, store.reserve(ChunkKey.of("m", "", 0, 0, 1, 1), MIB, 3), "a pinned object is never replaced");
        store.unpin(pinned, false);
        assertSame(ObjectStore.EXISTS, store.reserve(ChunkKey.of("m", "", 0, 0, 1, 1), MIB, 2), "the same layout still exists");
        store.checkInvariants();
    }

    @ParameterizedTest
    @EnumSource(value = EvictionPolicyName.class, names = "NOOP", mode = EnumSource.Mode.EXCLUDE)
    void aFullPoolOfAnotherSizeClassGivesUpAWholeRegion(EvictionPolicyName policy) {
        ObjectStore store = store(8 * MIB, 4 * MIB, policy);
        for (long h = 0; h < 8; h++) {
            put(store, h, MIB);
        }
        // 3 MiB objects need a region of their own class: the least recently used region is drained
        StoredObject big = store.reserve(ChunkKey.of("m", "", 0, 0, 100, 100), 3 * MIB, 1);
        assertTrue(big.offset() >= 0, "no failure from fragmentation while objects are evictable");
        store.commit(big);
        assertEquals(4, store.counters().evictions(EvictionReason.DEMAND));
        store.checkInvariants();
    }

    @Test
    void noopPolicyFailsWhenFull() {
        ObjectStore store = store(4 * MIB, 4 * MIB, EvictionPolicyName.NOOP);
        put(store, 1, 2 * MIB);
        put(store, 2, 2 * MIB);
        assertSame(ObjectStore.NO_MEMORY, store.reserve(ChunkKey.of("m", "", 0, 0, 3, 3), 2 * MIB, 1));
        assertTrue(present(store, 1, 2 * MIB) && present(store, 2, 2 * MIB));
    }

    @ParameterizedTest
    @EnumSource(value = EvictionPolicyName.class, names = "NOOP", mode = EnumSource.Mode.EXCLUDE)
    void watermarkEvictionFreesTheRatio(EvictionPolicyName policy) {
        ObjectStore store = store(10 * MIB, 10 * MIB, policy);
        for (long h = 0; h < 9; h++) {
            put(store, h, MIB);
        }
        EvictionController controller = new EvictionController(store, 0.8, 0.2, 1, List.of());
        nowNs.addAndGet(ArcPolicy.YOUNG_FLOOR_NS); // past ARC's floor: a background pass spares younger objects
        assertEquals(2 * MIB, controller.tick(), "at 90% it frees 20% of the pool");
        assertEquals(7 * MIB, store.snapshot().usedBytes());
        assertEquals(0, controller.tick(), "below the watermark it does nothing");
        assertFalse(present(store, 0, MIB) || present(store, 1, MIB), "the oldest went");
    }

    @ParameterizedTest
    @EnumSource(EvictionPolicyName.class)
    void aFailingSweeperIsCountedAndTheControllerGoesOn(EvictionPolicyName policy) {
        ObjectStore store = store(4 * MIB, 4 * MIB, policy);
        EvictionController controller = new EvictionController(store, 0.8, 0.2, 1, List.of(() -> {
            throw new IllegalStateException("boom");
        }));
        controller.tick();
        controller.tick();
        assertEquals(2, store.counters().evictionFailures.sum());
        assertEquals(2, store.counters().evictionLoopTicks.sum());
    }

    @ParameterizedTest
    @EnumSource(EvictionPolicyName.class)
    void clearKeepsObjectsInUseUnlessForced(EvictionPolicyName policy) {
        ObjectStore store = store(8 * MIB, 8 * MIB, policy);
        put(store, 1, MIB);
        StoredObject writing = store.reserve(ChunkKey.of("m", "", 0, 0, 2, 2), MIB, 1);
        put(store, 3, MIB);
        StoredObject pinned = store.pinReady(ChunkKey.of("m", "", 0, 0, 3, 3), MIB, 1);
        ObjectStore.ClearResult soft = store.clear(false);
        assertEquals(1, soft.removed());
        assertNotNull(pinned);
        ObjectStore.ClearResult forced = store.clear(true);
        assertEquals(2, forced.deferred(), "the writing and the pinned one go when released");
        assertNull(store.pinReady(ChunkKey.of("m", "", 0, 0, 3, 3), MIB, 1), "gone from view at once");
        assertTrue(store.snapshot().usedBytes() > 0, "but their memory is not reused under the copy");
        store.unpin(pinned, true);
        assertFalse(store.commit(writing), "a doomed write is not published");
        assertEquals(0, store.snapshot().usedBytes());
        store.checkInvariants();
    }
    @ParameterizedTest
    @EnumSource(EvictionPolicyName.class)
    void theO1CountsEqualAFullRecountAfterEveryStep(EvictionPolicyName policy) {
        ObjectStore store = store(16 * MIB, 4 * MIB, policy);
        Random random = new Random(42);
        List<StoredObject> writing = new ArrayList<>();
        List<StoredObject> pinned = new ArrayList<>();
        List<ObjectStore.ReadLock> locks = new ArrayList<>();
        long[] sizes = {MIB / 2, MIB, 3 * MIB};
        int deferredByForce = 0;
        int maxPinned = 0;
        for (int step = 0; step < 20_000; step++) {
            long hash = random.nextInt(12);
            long size = sizes[(int) (hash % sizes.length)];
            String salt = (hash & 1) == 0 ? "" : "tenant";
            switch (random.nextInt(14)) {
                case 0, 1 -> {
                    StoredObject object = store.reserve(ChunkKey.of("m", salt, 0, 0, hash, hash), size, 1);
                    if (object.offset() >= 0) {
                        writing.add(object);
                    }
                }
                case 2, 3 -> {
                    if (!writing.isEmpty()) {
                        store.commit(writing.remove(random.nextInt(writing.size())));
                    }
                }
                case 4 -> {
                    if (!writing.isEmpty()) {
                        store.abort(writing.remove(random.nextInt(writing.size())));
                    }
                }
                case 5, 6 -> {
                    StoredObject object = store.pinReady(ChunkKey.of("m", salt, 0, 0, hash, hash), size, 1);
                    if (object != null) {
                        pinned.add(object);
                    }
                }
                case 7 -> {
                    if (!pinned.isEmpty()) {
                        store.unpin(pinned.remove(random.nextInt(pinned.size())), random.nextBoolean());
                    }
                }
                case 8 -> store.lookupAndLock(PrefixKeys.ofWords("m", salt, 1, 0, hash, hash), 0, 1, 1 + random.nextInt(2), locks, null);
                case 9 -> {
                    if (!locks.isEmpty()) {
                        store.releaseRead(locks.remove(random.nextInt(locks.size())), 1 + random.nextInt(2));
                    }
                }
                case 10 -> {
                    // now and then past both TTLs: write and read locks expire
                    nowNs.addAndGet(random.nextInt(8) == 0 ? WRITE_TTL_NS + 1 : 0);
                    store.sweepExpired();
                }
                case 11 -> store.evict(random.nextInt(3) * size, EvictionReason.WATERMARK);
                default -> {
                    if (random.nextInt(10) == 0) {
                        boolean force = random.nextBoolean();
                        ObjectStore.ClearResult cleared = store.clear(force);
                        deferredByForce += force ? cleared.deferred() : 0;
                    }
                }
            }
            maxPinned = Math.max(maxPinned, store.snapshot().pinned());
            assertEquals(store.recount(), store.snapshot(), "step " + step);
            assertEquals(store.snapshot().usedBytes(), store.usedBytes());
            assertEquals(store.snapshot().objects(), store.objectCount());
        }
        if (policy == EvictionPolicyName.NOOP) {
            assertEquals(0, store.counters().evictions(EvictionReason.DEMAND), "noop never evicts");
            assertTrue(store.counters().allocationFailures.sum() > 0, "so the full pool refused stores");
        } else {
            assertTrue(store.counters().evictions(EvictionReason.DEMAND) > 0, "the pool filled and evicted on demand");
        }
        assertTrue(store.counters().readLockExpiries.sum() > 0 && store.counters().writeLockExpiries.sum() > 0, "locks expired");
        assertTrue(deferredByForce > 0 && maxPinned > 1, "forced clears met objects in use (" + deferredByForce + "), pins overlapped");
        store.checkInvariants();
    }
}
