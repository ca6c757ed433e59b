package io.lmcache.server.module;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.config.CommitSettings;
import io.lmcache.server.config.EvictionPolicyName;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.EngineDrivenRegistration;
import io.lmcache.server.protocol.RequestConfigs;
import io.lmcache.server.protocol.RequestTags;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ChunkKey;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.PrefixKeys;
import io.lmcache.server.storage.ReadyStores;
import io.lmcache.server.storage.StoreCounters;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.transfer.ObjectGroupCatalog;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The tables that outlive a request (issue 45 N1): a flood of megabyte wire strings leaves them within their byte caps. */
class TableBoundsTest {
    private static final int MIB = 1 << 20;
    private static final long TTL_NS = TimeUnit.SECONDS.toNanos(60);

    private static String huge(int i) {
        return "r".repeat(MIB) + i;
    }

    @Test
    void lookupResultsOfMegabyteRequestIdsHoldOnlyTheirDigests() {
        PrefetchResults results = new PrefetchResults(TTL_NS, System::nanoTime);
        for (int i = 0; i < 900; i++) {
            results.put(huge(i), i);
        }
        assertEquals(900, results.size());
        assertTrue(results.table().bytes() < 900L * 512, "900 one-megabyte request ids hold " + results.table().bytes() + " bytes");
        assertEquals(17, results.take(huge(17)), "a long id still finds its result");
        assertEquals(-1, results.take(huge(17)), "once");
    }

    @Test
    void lookupResultsPastTheByteCapDropTheOldestCounted() {
        PrefetchResults results = new PrefetchResults(TTL_NS, System::nanoTime, 1 << 20, 64 << 10);
        for (int i = 0; i < 10_000; i++) {
            results.put("request-" + i, 1);
        }
        assertTrue(results.table().bytes() <= 64 << 10);
        assertTrue(results.table().evictions() > 0);
        assertEquals(10_000, results.size() + results.table().evictions());
        assertEquals(1, results.take("request-9999"), "the newest stays");
        assertEquals(-1, results.take("request-0"), "the oldest went: its QUERY answers 0");
    }

    @Test
    void leasesPastTheByteCapReleaseTheOldestLocks() {
        ObjectStore store = ReadyStores.of(64L * MIB, 64L * MIB, EvictionPolicyName.LRU, TTL_NS, TTL_NS, System::nanoTime, new StoreCounters());
        StoredObject object = store.reserve(ChunkKey.of("m", "", 0, 0, 1, 1), MIB, 1);
        store.commit(object);
        LookupLeases leases = new LookupLeases(store, TTL_NS, System::nanoTime, 1 << 20, 16 << 10);
        for (int i = 0; i < 200; i++) {
            List<ObjectStore.ReadLock> locks = new ArrayList<>();
            store.lookupAndLock(PrefixKeys.ofWords("m", "", 1, 0, 1, 1), 0, 1, 1, locks, null);
            leases.put(huge(i), locks, 1, 1);
        }
        assertTrue(leases.table().bytes() <= 16 << 10, "bytes " + leases.table().bytes());
        assertEquals(200, leases.size() + leases.table().evictions());
        assertEquals(1, store.snapshot().readLocked(), "one object, still read-locked by the leases kept");
        for (int i = 0; i < 200; i++) {
            leases.end(huge(i));
        }
        assertEquals(0, store.snapshot().readLocked(), "every lock came back: evicted leases released theirs");
    }

    @Test
    void windowSessionsOfMegabyteModelNamesStayWithinTheirByteCap() {
        ObjectStore store = ReadyStores.of(64L * MIB, 64L * MIB, EvictionPolicyName.LRU, TTL_NS, TTL_NS, System::nanoTime, new StoreCounters());
        CommitSettings settings = new CommitSettings(CommitSettings.Policy.STOP_TOKEN, CommitSettings.Anchor.GENERATION_END, List.of());
        WindowCommit commit = new WindowCommit(settings, 256, store, new ObjectGroupCatalog(true), pinned -> 0, 1 << 16, 8L * MIB);
        int[] tokens = new int[512];
        for (int i = 0; i < 100; i++) {
            String model = "m".repeat(MIB) + i;
            commit.looked(new CacheKey(model, 1, CacheKey.NO_WORKER, tokens, 0, 512, huge(i), "", 1, RequestConfigs.NONE));
        }
        assertTrue(commit.table().bytes() <= 8L * MIB, "bytes " + commit.table().bytes());
        assertTrue(commit.table().evictions() > 90, "most sessions forgotten: " + commit.table().evictions());
        assertEquals(commit.table().evictions(), ((Number) commit.status().get("forgotten_sessions")).longValue());
    }

    @Test
    void anEngineDrivenContextAdmitsBoundedPendingKeys() {
        EngineDrivenContext.PendingKey key = new EngineDrivenContext.PendingKey("m".repeat(MIB), "s".repeat(MIB), RequestTags.NONE, 1, 0, 0, 256,
                new ChunkHash(1, 2, 3, 4));
        assertTrue(key.bytes() < 2048, "model and salt kept as digests: " + key.bytes());
        assertFalse(key.model().length() > 1000);
        EngineDrivenContext context = new EngineDrivenContext(null, 1, new int[] {1}, 0);
        int admitted = 0;
        for (int i = 0; i < 5000; i++) {
            EngineDrivenContext.PendingKey miss = new EngineDrivenContext.PendingKey("model", "salt-" + i, RequestTags.NONE, 1, 0, 0, 256,
                    new ChunkHash(i, 0, 0, 0));
            if (context.admits(miss)) {
                context.putRead(miss, new EngineDrivenContext.Pending(List.of(), 0));
                admitted++;
            }
        }
        assertEquals(EngineDrivenContext.MAX_PENDING, admitted, "remembered misses are capped");
        assertTrue(context.pendingBytes() <= EngineDrivenContext.MAX_PENDING_BYTES);
        List<EngineDrivenContext.Pending> writes = new ArrayList<>();
        List<EngineDrivenContext.Pending> reads = new ArrayList<>();
        context.drain(writes, reads);
        assertEquals(0, context.pendingBytes());
    }

    /** Issue 45: a 200 000-character model name appeared whole in /status; the module's own status entries clip it. */
    @Test
    void aHugeModelNameIsClippedInTheStatusEntry() {
        String model = "m".repeat(200_000);
        EngineDrivenContext context = new EngineDrivenContext(new EngineDrivenRegistration(1, model, 1, 16, 4, 128,
                "bfloat16", false, 256, 1), 1, new int[] {1}, 0);
        String shown = (String) context.status().get("model_name");
        assertTrue(shown.length() < 300, "clipped: " + shown.length());
        assertTrue(shown.endsWith("(200000 chars)"), shown.substring(shown.length() - 30));
    }
}
