package io.lmcache.server.module;

import static org.junit.jupiter.api.Assertions.assertEquals;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ChunkKey;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.RequestConfigs;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.PendingFills;
import io.lmcache.server.storage.ReadyStores;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.transfer.ChunkHashes;
import io.lmcache.server.transfer.ObjectGroupCatalog;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** LOOKUP hashes its chunks in growing windows and stops at the first miss: every stored prefix length must still be counted exactly. */
class LookupModuleTest {
    private static final int CHUNK = 16;
    private static final int CHUNKS = 13; // windows 1, 2, 4, 6 (cut): boundaries at 1, 3, 7, 13
    private static final long OBJECT_BYTES = 4096;

    @Test
    void everyStoredPrefixLengthIsCountedAndLocked() {
        int[] tokens = new int[CHUNKS * CHUNK + 5]; // and a partial chunk that never counts
        Random random = new Random(3);
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = random.nextInt(150_000);
        }
        for (int stored = 0; stored <= CHUNKS; stored++) {
            for (int worldSize = 1; worldSize <= 2; worldSize++) {
                ObjectStore store = store();
                byte[] hashes = ChunkHashes.of(key(tokens, worldSize, "r"), CHUNK, CHUNKS);
                for (int chunk = 0; chunk < stored; chunk++) {
                    for (int rank = 0; rank < worldSize; rank++) {
                        // with two ranks, the chunk after the stored prefix exists for rank 0 only: still a miss
                        put(store, rank, hashes, chunk);
                    }
                }
                if (worldSize == 2 && stored < CHUNKS) {
                    put(store, 0, hashes, stored);
                }
                PrefetchResults results = new PrefetchResults(TimeUnit.SECONDS.toNanos(60), System::nanoTime);
                LookupLeases leases = new LookupLeases(store, TimeUnit.SECONDS.toNanos(60), System::nanoTime);
                LookupModule module = new LookupModule(CHUNK, store, leases, results, new ServerMetrics(), new ObjectGroupCatalog(true));

                module.lookup(new Request.Lookup(key(tokens, worldSize, "req"), worldSize));

                String what = stored + " chunks stored, world size " + worldSize;
                assertEquals(new Reply.Int(stored == 0 ? 0 : stored), module.query("req"), what);
                assertEquals(stored * worldSize, store.snapshot().readLocked(), what + ": each hit chunk read-locked once per rank");
                store.checkInvariants();
            }
        }
    }

    /**
     * Chunks whose write is in flight (reserved, not committed) count as pending: the result stays None until every such
     * write ends, then it is the prefix as stored (a failed write is a miss), with the locks of exactly that prefix.
     */
    @Test
    void chunksBeingWrittenLeaveTheResultPendingUntilTheirWritesEnd() {
        int[] tokens = new int[CHUNKS * CHUNK];
        Random random = new Random(4);
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = random.nextInt(150_000);
        }
        for (int failAt = -1; failAt < 5; failAt++) {
            ObjectStore store = store();
            byte[] hashes = ChunkHashes.of(key(tokens, 1, "r"), CHUNK, CHUNKS);
            put(store, 0, hashes, 0);
            StoredObject[] writing = new StoredObject[5];
            for (int chunk = 1; chunk <= writing.length; chunk++) {
                writing[chunk - 1] = store.reserve(new ChunkKey("model", "", 0, 0, ChunkHash.unpack(hashes, chunk)), OBJECT_BYTES, 1);
            }
            put(store, 0, hashes, 6); // chunk 6 stored, chunk 7 missing: the prefix can reach 7
            PrefetchResults results = new PrefetchResults(TimeUnit.SECONDS.toNanos(60), System::nanoTime);
            LookupLeases leases = new LookupLeases(store, TimeUnit.SECONDS.toNanos(60), System::nanoTime);
            LookupModule module = new LookupModule(CHUNK, store, leases, results, new ServerMetrics(), new ObjectGroupCatalog(true));

            module.lookup(new Request.Lookup(key(tokens, 1, "req"), 1));

            String what = failAt < 0 ? "every write commits" : "the write of chunk " + (failAt + 1) + " fails";
            assertEquals(Reply.NONE, module.query("req"), what + ": pending while writes run");
            assertEquals(0, store.snapshot().readLocked(), what + ": a pending lookup holds no locks");
            for (int i = writing.length - 1; i >= 0; i--) {
                assertEquals(Reply.NONE, module.query("req"), what + ": pending until the last write ends");
                if (i == failAt) {
                    store.abort(writing[i]);
                } else {
                    assertTrue(store.commit(writing[i]));
                }
            }
            int expected = failAt < 0 ? 7 : failAt + 1;
            assertEquals(new Reply.Int(expected), module.query("req"), what);
            assertEquals(expected, store.snapshot().readLocked(), what + ": exactly the hit chunks are read-locked");
            assertTrue(store.counters().lookupsAfterWrites.sum() >= 1, what);
            store.checkInvariants();
        }
    }

    /** A flood of LOOKUPs on a write that does not end is bounded: past the cap a lookup counts the chunk as a miss. */
    @Test
    void lookupsWaitingOnWritesAreBounded() {
        int[] tokens = new int[CHUNK];
        ObjectStore store = store();
        byte[] hashes = ChunkHashes.of(key(tokens, 1, "r"), CHUNK, 1);
        StoredObject writing = store.reserve(new ChunkKey("model", "", 0, 0, ChunkHash.unpack(hashes, 0)), OBJECT_BYTES, 1);
        PrefetchResults results = new PrefetchResults(TimeUnit.SECONDS.toNanos(60), System::nanoTime);
        LookupLeases leases = new LookupLeases(store, TimeUnit.SECONDS.toNanos(60), System::nanoTime);
        LookupModule module = new LookupModule(CHUNK, store, leases, results, new ServerMetrics(), new ObjectGroupCatalog(true));
        for (int i = 0; i < PendingFills.MAX_WAITING; i++) {
            module.lookup(new Request.Lookup(key(tokens, 1, "w" + i), 1));
        }
        assertEquals(Reply.NONE, module.query("w0"), "the first lookups wait for the write");
        assertEquals(0, store.counters().lookupWatchesRefused.sum());
        module.lookup(new Request.Lookup(key(tokens, 1, "over"), 1));
        assertEquals(new Reply.Int(0), module.query("over"), "past the cap: a miss at once, as before a commit");
        assertEquals(1, store.counters().lookupWatchesRefused.sum());
        assertTrue(store.commit(writing));
        assertEquals(new Reply.Int(1), module.query("w" + (PendingFills.MAX_WAITING - 1)), "the waiting ones complete on the commit");
        module.lookup(new Request.Lookup(key(tokens, 1, "after"), 1));
        assertEquals(new Reply.Int(1), module.query("after"));
        store.checkInvariants();
    }

    /**
     * SGLang's TP ranks each send LOOKUP and QUERY on their own connection under one request id: each gets its count once; a
     * connection that sent no LOOKUP gets 0. Without {@code num_kv_readers} (0), each hit object is read-locked once.
     */
    @Test
    void eachConnectionGetsItsOwnCountForASharedRequestId() {
        int[] tokens = new int[2 * CHUNK];
        ObjectStore store = store();
        byte[] hashes = ChunkHashes.of(key(tokens, 2, "r"), CHUNK, 2);
        for (int chunk = 0; chunk < 2; chunk++) {
            for (int rank = 0; rank < 2; rank++) {
                put(store, rank, hashes, chunk);
            }
        }
        PrefetchResults results = new PrefetchResults(TimeUnit.SECONDS.toNanos(60), System::nanoTime);
        LookupLeases leases = new LookupLeases(store, TimeUnit.SECONDS.toNanos(60), System::nanoTime);
        LookupModule module = new LookupModule(CHUNK, store, leases, results, new ServerMetrics(), new ObjectGroupCatalog(true));
        PeerId rank0 = new PeerId(new byte[] {0, 1});
        PeerId rank1 = new PeerId(new byte[] {0, 2});
        CacheKey noReaders = new CacheKey("model", 2, CacheKey.NO_WORKER, tokens, 0, tokens.length, "rid", "", 0, RequestConfigs.NONE);
        module.lookup(new Request.Lookup(noReaders, 2), rank0);
        module.lookup(new Request.Lookup(noReaders, 2), rank1);
        assertEquals(4, store.snapshot().readLocked(), "num_kv_readers 0 is read as 1: the last LOOKUP's lease holds one lock per object");
        assertEquals(new Reply.Int(2), module.query(LookupModule.resultKey(rank0, "rid")));
        assertEquals(new Reply.Int(2), module.query(LookupModule.resultKey(rank1, "rid")));
        assertEquals(new Reply.Int(0), module.query(LookupModule.resultKey(rank1, "rid")), "once");
        assertEquals(new Reply.Int(0), module.query(LookupModule.resultKey(new PeerId(new byte[] {0, 3}), "rid")), "not another connection's");
        module.endSession(new Request.EndSession("rid", null), rank0);
        assertEquals(0, store.snapshot().readLocked());
    }

    private static CacheKey key(int[] tokens, int worldSize, String requestId) {
        return new CacheKey("model", worldSize, CacheKey.NO_WORKER, tokens, 0, tokens.length, requestId, "", 1, RequestConfigs.NONE);
    }

    private static void put(ObjectStore store, int rank, byte[] hashes, int chunk) {
        StoredObject object = store.reserve(new ChunkKey("model", "", rank, 0, ChunkHash.unpack(hashes, chunk)), OBJECT_BYTES, 1);
        assertTrue(object.offset() >= 0);
        assertTrue(store.commit(object));
    }

    private static ObjectStore store() {
        long pool = 2L * (CHUNKS + 1) * OBJECT_BYTES;
        return ReadyStores.lru(pool, pool);
    }
}
