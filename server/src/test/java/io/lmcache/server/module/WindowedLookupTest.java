package io.lmcache.server.module;

import static org.junit.jupiter.api.Assertions.assertEquals;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ChunkKey;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.RequestConfigs;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.ReadyStores;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.transfer.ChunkHashes;
import io.lmcache.server.transfer.GroupKind;
import io.lmcache.server.transfer.LookupGeometry;
import io.lmcache.server.transfer.ObjectGroupCatalog;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * LOOKUP of a model with a full-attention and a windowed object group: the hit every group serves,
 * read locks on exactly the retained objects, and RETRIEVE, FREE_LOOKUP_LOCKS and END_SESSION
 * giving back exactly those.
 */
class WindowedLookupTest {
    private static final int CHUNK = 16;
    private static final long OBJECT_BYTES = 4096;
    private static final LookupGeometry FULL_AND_SNAPSHOT = new LookupGeometry(new int[] {-1, 1},
            new GroupKind[] {GroupKind.ATTENTION, GroupKind.RECURRENT});

    private final ObjectStore store = store();
    private final LookupLeases leases = new LookupLeases(store, TimeUnit.SECONDS.toNanos(60), System::nanoTime);
    private final ObjectGroupCatalog catalog = new ObjectGroupCatalog(true);
    private final LookupModule module = new LookupModule(CHUNK, store, leases, new PrefetchResults(TimeUnit.SECONDS.toNanos(60),
            System::nanoTime), new ServerMetrics(), catalog);
    private final int[] tokens = tokens(4 * CHUNK);

    @Test
    void locksExactlyTheRetainedObjectsAndReleasesExactlyThose() {
        catalog.publish("model", 2, FULL_AND_SNAPSHOT);
        byte[] hashes = ChunkHashes.of(key(tokens, 2, "h", 4), CHUNK, 4);
        for (int rank = 0; rank < 2; rank++) {
            for (int chunk = 0; chunk < 4; chunk++) {
                put(rank, 0, hashes, chunk);
            }
            put(rank, 1, hashes, 2); // snapshots at the end of chunks 2 and 3 only
            put(rank, 1, hashes, 3);
        }
        put(0, 1, hashes, 1); // rank 1 lacks chunk 1's snapshot: not present

        assertEquals(new Reply.Int(4), lookup("a", 2, 4));
        assertEquals(2 * (4 + 1), store.snapshot().readLocked(), "full attention chunks 0..3 and the snapshot of chunk 3, per rank");
        leases.releaseRetrieved("a", 0, 0, 4);
        assertEquals(5, store.snapshot().readLocked(), "rank 0's RETRIEVE gave back its five");
        module.freeLookupLocks(new Request.FreeLookupLocks(key(tokens, 2, "a", 4), 1));
        assertEquals(0, store.snapshot().readLocked());

        assertEquals(new Reply.Int(3), lookup("b", 2, 3), "chunk 2's snapshot ends a 3-chunk prefix");
        assertEquals(2 * (3 + 1), store.snapshot().readLocked());
        assertEquals(new Reply.Int(0), lookup("c", 2, 2), "no snapshot present for all ranks at the end of chunk 1 (or 0)");
        assertEquals(2 * (3 + 1), store.snapshot().readLocked(), "a miss locks nothing");
        module.endSession(new Request.EndSession("b", null));
        assertEquals(0, store.snapshot().readLocked());
        store.checkInvariants();
    }

    /** Across TP ranks and object groups: a snapshot still being written for one rank leaves the hit pending until it ends. */
    @Test
    void aSnapshotBeingWrittenForOneRankLeavesTheHitPendingUntilItsWriteEnds() {
        catalog.publish("model", 2, FULL_AND_SNAPSHOT);
        byte[] hashes = ChunkHashes.of(key(tokens, 2, "h", 4), CHUNK, 4);
        for (int rank = 0; rank < 2; rank++) {
            for (int chunk = 0; chunk < 4; chunk++) {
                put(rank, 0, hashes, chunk);
            }
            put(rank, 1, hashes, 2);
        }
        put(0, 1, hashes, 3);
        StoredObject writing = store.reserve(new ChunkKey("model", "", 1, 1, ChunkHash.unpack(hashes, 3)), OBJECT_BYTES, 1); // rank 1's last snapshot

        module.lookup(new Request.Lookup(key(tokens, 2, "w", 4), 1));
        assertEquals(Reply.NONE, module.query("w"), "pending while rank 1's snapshot of chunk 3 is written");
        assertEquals(0, store.snapshot().readLocked(), "a pending lookup holds no locks");
        assertTrue(store.commit(writing));
        assertEquals(new Reply.Int(4), module.query("w"), "the whole prefix once it commits");
        assertEquals(2 * (4 + 1), store.snapshot().readLocked(), "full attention chunks 0..3 and the snapshot of chunk 3, per rank");
        module.endSession(new Request.EndSession("w", null));

        ChunkHash second = ChunkHash.unpack(hashes, 2);
        StoredObject failing = store.reserve(new ChunkKey("model", "", 1, 1, new ChunkHash(second.w0(), second.w1() + 1, second.w2(), second.w3())),
                OBJECT_BYTES, 1);
        assertTrue(failing.offset() >= 0);
        module.lookup(new Request.Lookup(key(tokens, 2, "x", 4), 1));
        assertEquals(new Reply.Int(4), module.query("x"), "a write of an unrelated key does not hold the lookup");
        module.endSession(new Request.EndSession("x", null));
        store.abort(failing);
        assertEquals(0, store.snapshot().readLocked());
        store.checkInvariants();
    }

    @Test
    void freeLookupLocksOfARangeReleasesOnlyItsChunks() {
        catalog.publish("model", 1, new LookupGeometry(new int[] {-1, 2}, new GroupKind[] {GroupKind.ATTENTION, GroupKind.ATTENTION}));
        byte[] hashes = ChunkHashes.of(key(tokens, 1, "h", 4), CHUNK, 4);
        for (int chunk = 0; chunk < 4; chunk++) {
            put(0, 0, hashes, chunk);
            put(0, 1, hashes, chunk);
        }
        assertEquals(new Reply.Int(4), lookup("r", 1, 4));
        assertEquals(4 + 2, store.snapshot().readLocked(), "window 2: chunks 2 and 3 of the windowed group");
        CacheKey tail = new CacheKey("model", 1, CacheKey.NO_WORKER, tokens, 3 * CHUNK, 4 * CHUNK, "r", "", 1, RequestConfigs.NONE);
        module.freeLookupLocks(new Request.FreeLookupLocks(tail, 1));
        assertEquals(4 + 2 - 2, store.snapshot().readLocked(), "chunk 3 of both groups");
        module.endSession(new Request.EndSession("r", null));
        assertEquals(0, store.snapshot().readLocked());
    }

    @Test
    void aNonHybridModelStillUsesTheLeadingChunkCount() {
        byte[] hashes = ChunkHashes.of(key(tokens, 1, "h", 4), CHUNK, 4);
        put(0, 0, hashes, 0);
        put(0, 0, hashes, 1);
        put(0, 0, hashes, 3);
        assertEquals(new Reply.Int(2), lookup("p", 1, 4));
        assertEquals(2, store.snapshot().readLocked());
    }

    private Reply lookup(String requestId, int worldSize, int chunks) {
        module.lookup(new Request.Lookup(key(Arrays.copyOf(tokens, chunks * CHUNK), worldSize, requestId, chunks), 1));
        return module.query(requestId);
    }

    private static CacheKey key(int[] tokens, int worldSize, String requestId, int chunks) {
        return new CacheKey("model", worldSize, CacheKey.NO_WORKER, tokens, 0, chunks * CHUNK, requestId, "", 1, RequestConfigs.NONE);
    }

    private void put(int rank, int group, byte[] hashes, int chunk) {
        StoredObject object = store.reserve(new ChunkKey("model", "", rank, group, ChunkHash.unpack(hashes, chunk)), OBJECT_BYTES, 1);
        assertTrue(object.offset() >= 0);
        assertTrue(store.commit(object));
    }

    private static int[] tokens(int n) {
        int[] out = new int[n];
        for (int i = 0; i < n; i++) {
            out[i] = (i * 7919) % 150_000;
        }
        return out;
    }

    private static ObjectStore store() {
        long pool = 64 * OBJECT_BYTES;
        return ReadyStores.lru(pool, pool);
    }
}
