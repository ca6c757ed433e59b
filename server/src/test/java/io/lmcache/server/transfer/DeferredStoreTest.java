package io.lmcache.server.transfer;

import static io.lmcache.server.transfer.HybridTensors.NHD;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.config.EvictionPolicyName;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.RequestConfigs;
import io.lmcache.server.protocol.TokenHashChain;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.ReadyStores;
import io.lmcache.server.storage.StoreCounters;
import io.lmcache.server.storage.StoredObject;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A STORE hashes and reserves each chunk as its pieces go out (so the GPU copies the first chunks while the rest are hashed):
 * the same hashes and objects as hashing everything first, chunk 1 reserved only after chunk 0's pieces, and the same stop at
 * the first chunk without room.
 */
class DeferredStoreTest {
    private static final int CHUNK = 256;
    private static final long MIB = 1 << 20;

    private static CacheKey key(long seed, int chunks) {
        Random random = new Random(seed);
        int[] tokens = new int[chunks * CHUNK];
        Arrays.setAll(tokens, i -> random.nextInt(150_000));
        return new CacheKey("m", 1, 0, tokens, 0, tokens.length, "r" + seed, "", 1, RequestConfigs.NONE);
    }

    @Test
    void deferredHashesAreTheChainsChunkByChunk() {
        CacheKey key = key(1, 5);
        byte[] eager = new byte[ChunkHash.BYTES * 5];
        TokenHashChain.blake3().hashChunks(key.tokenIds(), CHUNK, 0, 5, eager);
        ChunkHashes deferred = ChunkHashes.deferred(key, CHUNK, 5);
        for (int j = 0; j < 5; j++) {
            assertEquals(ChunkHash.unpack(eager, j), deferred.hash(j), "chunk " + j);
        }
        assertArrayEquals(eager, deferred.bytes());
        // asked out of order, and completed at once: the same chain
        ChunkHashes other = ChunkHashes.deferred(key(2, 5), CHUNK, 5);
        ChunkHash third = other.hash(3);
        other.complete();
        assertEquals(ChunkHash.unpack(ChunkHashes.hash(key(2, 5), CHUNK, 5).bytes(), 3), third);
        assertArrayEquals(ChunkHashes.hash(key(2, 5), CHUNK, 5).bytes(), other.bytes());
    }

    @Test
    void chunkOneIsReservedAfterChunkZerosPiecesAndTheStoreStopsAtTheFirstChunkWithoutRoom() throws Exception {
        // one object group of 1.5 MiB a chunk; a 4 MiB pool without eviction holds two
        CacheGeometry gemma = CacheGeometry.of(HybridTensors.gemmaTensors(64), NHD, HybridTensors.gemmaInfos(), CHUNK, false);
        ObjectStore store = ReadyStores.of(4 * MIB, 4 * MIB, EvictionPolicyName.NOOP, TimeUnit.SECONDS.toNanos(60),
                TimeUnit.SECONDS.toNanos(60), System::nanoTime, new StoreCounters());
        CacheKey key = key(3, 3);
        int[][] ids = {blocks(0, 3 * 8), blocks(24, 3 * 16)};
        TransferPlan plan = new TransferPlan(new ChunkRange(0, 3), ChunkHashes.deferred(key, CHUNK, 3), GroupParts.of(gemma, 3, ids, true));
        ChunkObjects.Reserving reserving = new ChunkObjects.Reserving(store, key, plan);
        List<Integer> objectsAtPiece = new ArrayList<>();
        long[] bytes = new long[1];
        GroupPieces.emitReserving(plan, reserving, CHUNK, (tensor, tensorOffset, objectOffset, length) -> {
            objectsAtPiece.add(store.snapshot().objects());
            bytes[0] += length;
        });
        assertEquals(1, objectsAtPiece.getFirst(), "chunk 0's first piece goes out before chunk 1 is reserved");
        assertEquals(2, objectsAtPiece.getLast());
        assertFalse(reserving.allFit(), "the third chunk found no room");
        StoredObject[] objects = reserving.objects();
        assertNotNull(objects[0]);
        assertNotNull(objects[1]);
        assertNull(objects[2]);
        assertEquals(2 * plan.parts().getFirst().objectBytes(), bytes[0], "only the reserved chunks' bytes move");
        plan.hashes().complete();
        assertArrayEquals(ChunkHashes.hash(key, CHUNK, 3).bytes(), plan.hashes().bytes(), "the chain is whole after the stop too");

        // once committed, a STORE of the same tokens reserves nothing and moves nothing
        assertTrue(store.commitAll(objects, null));
        TransferPlan again = new TransferPlan(new ChunkRange(0, 2), ChunkHashes.deferred(key, CHUNK, 2), GroupParts.of(gemma, 2, ids, true));
        ChunkObjects.Reserving second = new ChunkObjects.Reserving(store, key, again);
        long[] moved = new long[1];
        GroupPieces.emitReserving(again, second, CHUNK, (tensor, tensorOffset, objectOffset, length) -> moved[0] += length);
        assertTrue(second.allFit());
        assertEquals(0, moved[0]);
        assertTrue(Arrays.stream(second.objects()).allMatch(o -> o == null), "both chunks are stored already");
    }

    private static int[] blocks(int first, int count) {
        int[] ids = new int[count];
        Arrays.setAll(ids, i -> first + i);
        return ids;
    }
}
