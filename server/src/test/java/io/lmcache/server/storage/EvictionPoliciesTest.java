package io.lmcache.server.storage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.config.EvictionPolicyName;
import io.lmcache.server.storage.StoreCounters.EvictionReason;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.LongStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** What each policy is for, through the store: scans against a hot set, tenants over quota, noop. */
class EvictionPoliciesTest {
    private static final long MIB = 1 << 20;
    private static final int POOL_OBJECTS = 20;
    private static final long HOT = 5;

    private static ObjectStore store(EvictionPolicyName policy, long poolBytes) {
        return ReadyStores.of(poolBytes, poolBytes, policy, TimeUnit.SECONDS.toNanos(600), TimeUnit.SECONDS.toNanos(300), System::nanoTime,
                new StoreCounters());
    }

    private static ChunkKey key(String salt, long hash) {
        return ChunkKey.of("m", salt, 0, 0, hash, hash);
    }

    private static void put(ObjectStore store, String salt, long hash) {
        StoredObject object = store.reserve(key(salt, hash), MIB, 1);
        assertTrue(object.offset() >= 0, "reserved " + salt + "/" + hash);
        assertTrue(store.commit(object));
    }

    /** A hit: a lookup read-locks the chunk, a RETRIEVE copies it out, the lookup's lock goes. */
    private static boolean read(ObjectStore store, String salt, long hash) {
        List<ObjectStore.ReadLock> locks = new ArrayList<>();
        if (store.lookupAndLock(PrefixKeys.ofWords("m", salt, 1, 0, hash, hash), 0, 1, 1, locks, null) == 0) {
            return false;
        }
        StoredObject pinned = store.pinReady(key(salt, hash), MIB, 1);
        store.unpin(pinned, true);
        store.releaseRead(locks.getFirst(), 1);
        return true;
    }

    private static boolean present(ObjectStore store, String salt, long hash) {
        StoredObject object = store.pinReady(key(salt, hash), MIB, 1);
        if (object != null) {
            store.unpin(object, false);
        }
        return object != null;
    }

    /** A hot set read twice, then a one-off scan twice the pool: how much of the hot set is left. */
    private static long hotLeftAfterAScan(ObjectStore store) {
        for (long h = 0; h < HOT; h++) {
            put(store, "", h);
        }
        for (int pass = 0; pass < 2; pass++) {
            for (long h = 0; h < HOT; h++) {
                assertTrue(read(store, "", h));
            }
        }
        for (long h = 1000; h < 1000 + 2 * POOL_OBJECTS; h++) {
            put(store, "", h);
            store.checkInvariants();
        }
        return LongStream.range(0, HOT).filter(h -> present(store, "", h)).count();
    }

    @Test
    void lruLosesTheHotSetToAScan() {
        // what the other policies are measured against: this is why they exist
        assertEquals(0, hotLeftAfterAScan(store(EvictionPolicyName.LRU, POOL_OBJECTS * MIB)));
    }

    @ParameterizedTest
    @EnumSource(value = EvictionPolicyName.class, names = {"ARC", "S3FIFO"})
    void aOneOffScanLeavesTheHotSetAlone(EvictionPolicyName policy) {
        ObjectStore store = store(policy, POOL_OBJECTS * MIB);
        assertEquals(HOT, hotLeftAfterAScan(store), policy + " kept the hot set");
        assertTrue(store.counters().evictions(EvictionReason.DEMAND) >= POOL_OBJECTS, "the scan evicted");
        store.checkInvariants();
    }

    @Test
    void arcAdaptsWhenTheScanComesBack() {
        ObjectStore store = store(EvictionPolicyName.ARC, POOL_OBJECTS * MIB);
        hotLeftAfterAScan(store);
        assertEquals(0L, store.policyStatus().get("p_bytes"), "nothing came back yet: T1's target stays 0");
        assertTrue((long) store.policyStatus().get("b1_ghosts") > 0, "the scan's evicted keys are ghosts of T1");
        // the scan's last evicted keys are requested again: T1 was too small, so its target grows, and they go to T2
        for (long h = 1024; h >= 1020; h--) {
            put(store, "", h);
        }
        assertEquals(5L, store.policyStatus().get("ghost_hits"));
        assertTrue((long) store.policyStatus().get("p_bytes") >= 5 * MIB, "p grew by at least an object per ghost hit");
        store.checkInvariants();
    }

    @Test
    void s3fifoPromotesWhatWasReadAndForgetsTheScan() {
        ObjectStore store = store(EvictionPolicyName.S3FIFO, POOL_OBJECTS * MIB);
        hotLeftAfterAScan(store);
        assertEquals(HOT, store.policyStatus().get("promoted_to_main"), "the hot set moved to main");
        assertTrue((long) store.policyStatus().get("ghost_keys") > 0, "the scan left ghosts");
        put(store, "", 1024); // the scan's last victim: back, it goes straight to main
        assertEquals(1L, store.policyStatus().get("ghost_hits"));
        store.checkInvariants();
    }

    @Test
    void aTenantOverItsQuotaIsEvictedFirst() {
        ObjectStore store = store(EvictionPolicyName.ISOLATED_LRU, 8 * MIB);
        assertTrue(store.setTenantQuota("a", 2 * MIB));
        for (long h = 0; h < 4; h++) {
            put(store, "b", h); // the globally oldest: LRU would take these first
        }
        for (long h = 0; h < 4; h++) {
            put(store, "a", h);
        }
        put(store, "b", 100);
        put(store, "", 100);
        assertFalse(present(store, "a", 0) || present(store, "a", 1), "tenant a, 2 MiB over its quota, gave its two oldest");
        TenantUsage shared = usage(store, TenantLruPolicy.DEFAULT_TENANT);
        assertEquals(new TenantUsage(TenantLruPolicy.DEFAULT_TENANT, 6 * MIB, 6 * MIB, 6), shared,
                "b and the empty salt, with no quota of their own, share the default bucket: what a's quota leaves of the pool");
        assertEquals(2L, store.policyStatus().get("quota_evictions"));
        assertEquals(new TenantUsage("a", 2 * MIB, 2 * MIB, 2), usage(store, "a"), "a is at its quota now");
        assertEquals(2, store.tenantUsage().size(), "no line of b's own");
        // nobody is over now: the STORE's own bucket, at its share, gives its least recently used (not a, at its quota)
        put(store, "b", 101);
        assertFalse(present(store, "b", 0), "the bucket's least recently used went");
        assertTrue(present(store, "a", 2) && present(store, "a", 3), "a, at its quota, kept its own");
        assertEquals(3L, store.policyStatus().get("quota_evictions"));
        store.checkInvariants();
    }

    private static TenantUsage usage(ObjectStore store, String tenant) {
        return store.tenantUsage().stream().filter(t -> t.tenant().equals(tenant)).findFirst().orElseThrow();
    }

    /** Issue 45 N5: a fresh salt per STORE used to be a fresh tenant, never over a quota, so the global LRU took the victim's. */
    @Test
    void freshSaltsShareTheDefaultBucketAndCannotEscapeTheQuotas() {
        ObjectStore store = store(EvictionPolicyName.ISOLATED_LRU, 8 * MIB);
        assertTrue(store.setTenantQuota("victim", 4 * MIB));
        for (long h = 0; h < 4; h++) {
            put(store, "victim", h); // the globally oldest
        }
        for (long h = 0; h < 40; h++) {
            put(store, "fresh-" + h, h);
            store.checkInvariants();
        }
        for (long h = 0; h < 4; h++) {
            assertTrue(present(store, "victim", h), "the victim, within its quota, kept chunk " + h);
        }
        assertEquals(new TenantUsage(TenantLruPolicy.DEFAULT_TENANT, 4 * MIB, 4 * MIB, 4), usage(store, TenantLruPolicy.DEFAULT_TENANT),
                "forty salts without a quota are one bucket, held to what the quotas leave");
        assertEquals(2, store.tenantUsage().size(), "and leave no tenant entry each");
        assertEquals(36L, store.policyStatus().get("quota_evictions"));
        // a quota set for _default replaces the remainder; removing it gives the remainder back
        assertTrue(store.setTenantQuota(TenantLruPolicy.DEFAULT_TENANT, MIB));
        assertEquals(MIB, usage(store, TenantLruPolicy.DEFAULT_TENANT).quotaBytes());
        assertTrue(store.setTenantQuota(TenantLruPolicy.DEFAULT_TENANT, -1));
        assertEquals(4 * MIB, usage(store, TenantLruPolicy.DEFAULT_TENANT).quotaBytes());
        store.checkInvariants();
    }

    /** Issue 45 N5: one tenant read-locking most of the pool left every other tenant's STOREs nothing to evict. */
    @ParameterizedTest
    @EnumSource(value = EvictionPolicyName.class, names = {"LRU", "ARC", "S3FIFO", "ISOLATED_LRU"})
    void oneTenantsReadLocksAreCappedToItsShareOfThePool(EvictionPolicyName policy) {
        ObjectStore store = store(policy, 8 * MIB);
        store.setReadLockShare(0.5);
        put(store, "victim", 99);
        for (long h = 0; h < 6; h++) {
            put(store, "hog", h);
        }
        List<ObjectStore.ReadLock> locks = new ArrayList<>();
        int hits = 0;
        for (long h = 0; h < 6; h++) {
            hits += store.lookupAndLock(PrefixKeys.ofWords("m", "hog", 1, 0, h, h), 0, 1, 1, locks, null);
        }
        assertEquals(4, hits, "the hog locked half the pool, its other LOOKUPs missed");
        assertEquals(2, store.counters().readShareMisses.sum(), "counted");
        assertEquals(4 * MIB, store.readLockedBytes("hog"));
        assertEquals(1, store.lookupAndLock(PrefixKeys.ofWords("m", "hog", 1, 0, 0, 0), 0, 1, 1, locks, null),
                "a chunk it holds locked already adds nothing: still a hit");
        // the other tenant stores and finds its chunks: the hog's unlocked ones give way
        for (long h = 0; h < 4; h++) {
            put(store, "victim", h);
        }
        for (long h = 0; h < 4; h++) {
            assertTrue(read(store, "victim", h), policy + ": the victim found chunk " + h);
        }
        store.checkInvariants();
        for (ObjectStore.ReadLock lock : locks) {
            store.releaseRead(lock, 1);
        }
        assertEquals(0, store.readLockedBytes("hog"), "released, nothing is counted");
        store.checkInvariants();

        ObjectStore alone = store(policy, 8 * MIB);
        alone.setReadLockShare(0.5);
        int found = 0;
        for (long h = 0; h < 6; h++) {
            put(alone, "", h);
            found += alone.lookupAndLock(PrefixKeys.ofWords("m", "", 1, 0, h, h), 0, 1, 1, new ArrayList<>(), null);
        }
        assertEquals(6, found, "a store of one tenant caps nobody: there is no other to leave room for");
        alone.checkInvariants();
    }

    /** Issue 45 N10: a watermark pass with T1's target near 0 emptied T1, taking chunks stored a moment before. */
    @Test
    void arcsBackgroundPassSparesYoungT1ObjectsButOnDemandEvictionDoesNot() {
        long[] nowNs = {0};
        ObjectStore store = ReadyStores.of(10 * MIB, 10 * MIB, EvictionPolicyName.ARC, TimeUnit.SECONDS.toNanos(600),
                TimeUnit.SECONDS.toNanos(300), () -> nowNs[0], new StoreCounters());
        for (long h = 0; h < 5; h++) {
            put(store, "", h);
        }
        nowNs[0] += ArcPolicy.YOUNG_FLOOR_NS;
        for (long h = 100; h < 103; h++) {
            put(store, "", h);
        }
        assertEquals(5 * MIB, store.evict(8 * MIB, EvictionReason.WATERMARK), "the pass took the old ones and stopped");
        for (long h = 100; h < 103; h++) {
            assertTrue(present(store, "", h), "stored just now, kept for its first LOOKUP: " + h);
        }
        assertTrue((long) store.policyStatus().get("young_spared") > 0);
        assertEquals(MIB, store.evict(MIB, EvictionReason.DEMAND), "a STORE that needs the room now still gets it");
        nowNs[0] += ArcPolicy.YOUNG_FLOOR_NS;
        assertEquals(2 * MIB, store.evict(8 * MIB, EvictionReason.WATERMARK), "past the floor they are ordinary victims");
        store.checkInvariants();
    }

    /** LMCache #4817: IsolatedLRU stopped evicting when every tenant was under its quota, and the pool froze full. */
    @Test
    void aPoolFullOfTenantsUnderTheirQuotasStillEvicts() {
        ObjectStore store = store(EvictionPolicyName.ISOLATED_LRU, 8 * MIB);
        store.setTenantQuota("a", 100 * MIB);
        store.setTenantQuota("b", 100 * MIB);
        for (long h = 0; h < 8; h++) {
            put(store, h % 2 == 0 ? "a" : "b", h);
        }
        put(store, "a", 100);
        assertFalse(present(store, "a", 0), "the globally oldest went");
        EvictionController controller = new EvictionController(store, 0.8, 0.25, 1, List.of());
        assertEquals(2 * MIB, controller.tick(), "and the background pass evicts too");
        assertEquals(3, store.counters().evictions(EvictionReason.DEMAND) + store.counters().evictions(EvictionReason.WATERMARK));
        assertEquals(0L, store.policyStatus().get("quota_evictions"));
        store.checkInvariants();
    }

    @Test
    void noopNeverEvicts() {
        ObjectStore store = store(EvictionPolicyName.NOOP, 4 * MIB);
        for (long h = 0; h < 4; h++) {
            put(store, "", h);
        }
        assertSame(ObjectStore.NO_MEMORY, store.reserve(key("", 9), MIB, 1));
        assertEquals(0, store.evict(4 * MIB, EvictionReason.WATERMARK), "not even when asked");
        assertEquals(0, new EvictionController(store, 0.5, 0.5, 1, List.of()).tick(), "nor above the watermark");
        assertEquals(4, store.snapshot().evictable(), "though everything is evictable");
        assertFalse(store.setTenantQuota("a", MIB), "and it keeps no quotas");
        store.checkInvariants();
    }
}
