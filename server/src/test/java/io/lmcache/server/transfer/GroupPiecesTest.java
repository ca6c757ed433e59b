package io.lmcache.server.transfer;

import static io.lmcache.server.transfer.HybridTensors.NHD;
import io.lmcache.server.storage.ChunkKey;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.config.EvictionPolicyName;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.ReadyStores;
import io.lmcache.server.storage.StoreCounters;
import io.lmcache.server.storage.StoredObject;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The copies of a hybrid transfer: per object group and kernel group, into that group's segment of each object. */
class GroupPiecesTest {
    record Piece(int tensor, long tensorOffset, long objectOffset, long length) {}

    @Test
    void everyObjectOfEveryGroupIsFilledOnceFromItsOwnTensors() throws Exception {
        CacheGeometry gemma = CacheGeometry.of(HybridTensors.gemmaTensors(64), NHD, HybridTensors.gemmaInfos(), 256, true);
        int[][] ids = {blocks(0, 16), blocks(20, 32)}; // 2 chunks: 8 sliding blocks and 16 full blocks each
        TransferPlan plan = new TransferPlan(new ChunkRange(0, 2), null, GroupParts.of(gemma, 2, ids, true));
        StoredObject[] objects = reserve(plan);
        List<Piece> pieces = emit(plan, objects, 0, 256);
        for (int j = 0; j < 2; j++) {
            for (int g = 0; g < 2; g++) {
                StoredObject object = objects[plan.objectIndex(j, g)];
                long end = object.offset() + plan.parts().get(g).objectBytes();
                List<Piece> into = pieces.stream().filter(p -> p.objectOffset() >= object.offset() && p.objectOffset() < end).toList();
                assertEquals(plan.parts().get(g).objectBytes(), into.stream().mapToLong(Piece::length).sum(), "chunk " + j + " group " + g);
                int[] tensors = into.stream().mapToInt(Piece::tensor).distinct().sorted().toArray();
                assertArrayEquals(g == 0 ? new int[] {0, 2} : new int[] {1, 3}, tensors, "each group copies its own layers");
            }
        }
        // chunk 1 of the sliding group starts at its 9th block id
        KernelGroup sliding = gemma.kernels().getFirst();
        long expected = sliding.layout().pieceOffset(0, 0, 8);
        assertTrue(pieces.stream().anyMatch(p -> p.tensor() == 0 && p.tensorOffset() == expected
                && p.objectOffset() == objects[plan.objectIndex(1, 0)].offset()));
    }

    @Test
    void aMambaStoreSkipsNullChunksAndARetrieveReadsOnlyTheLastSnapshot() throws Exception {
        int n = 544;
        CacheGeometry qwen = CacheGeometry.of(HybridTensors.qwenTensors(16, n), NHD, HybridTensors.qwenInfos(n), n, true);
        int[][] ids = {{0, 0, 7}, {1, 2, 3}}; // align mode: only the last chunk has a real snapshot
        List<TransferPlan.GroupPart> store = GroupParts.of(qwen, 3, ids, true);
        assertArrayEquals(new boolean[] {true, true, false}, store.get(0).skipped());
        assertNull(store.get(1).skipped(), "full-attention ids are never null");
        List<TransferPlan.GroupPart> retrieve = GroupParts.of(qwen, 3, ids, false);
        assertArrayEquals(new boolean[] {true, true, false}, retrieve.get(0).skipped(), "window of one chunk: the last only");
        assertNull(retrieve.get(1).skipped());

        // chunk 2N: the recurrent group moves the second block id of each chunk
        CacheGeometry twoN = CacheGeometry.of(HybridTensors.qwenTensors(16, n), NHD, HybridTensors.qwenInfos(n), 2 * n, true);
        int[][] twoNIds = {{0, 5, 0, 9}, {1, 2, 3, 4}};
        TransferPlan plan = new TransferPlan(new ChunkRange(0, 2), null, GroupParts.of(twoN, 2, twoNIds, false));
        StoredObject[] objects = reserve(plan);
        List<Piece> pieces = emit(plan, objects, 0, 2 * n);
        KernelGroup mamba = twoN.kernels().getFirst();
        List<Piece> state = pieces.stream().filter(p -> p.tensor() < 3).toList();
        assertTrue(state.stream().allMatch(p -> p.tensorOffset() % mamba.layout().blockStrideBytes() == 0
                && p.tensorOffset() / mamba.layout().blockStrideBytes() == 9
                || p.tensorOffset() % mamba.layout().blockStrideBytes() == mamba.layout().planeStrideBytes()
                && p.tensorOffset() / mamba.layout().blockStrideBytes() == 9), "only block 9 (chunk 1's snapshot) is read");
        assertEquals(twoN.objects().getFirst().objectBytes(), state.stream().mapToLong(Piece::length).sum());
    }

    @Test
    void skippedTokensOfARetrieveAreNotWritten() throws Exception {
        CacheGeometry gemma = CacheGeometry.of(HybridTensors.gemmaTensors(64), NHD, HybridTensors.gemmaInfos(), 256, true);
        int[][] ids = {blocks(0, 8), blocks(20, 16)};
        TransferPlan plan = new TransferPlan(new ChunkRange(0, 1), null, GroupParts.of(gemma, 1, ids, false));
        StoredObject[] objects = reserve(plan);
        long all = emit(plan, objects, 0, 256).stream().mapToLong(Piece::length).sum();
        long skipped = emit(plan, objects, 64, 256).stream().mapToLong(Piece::length).sum();
        // 64 tokens: 2 sliding blocks and 4 full blocks of every layer and plane
        long pieceBytes = gemma.kernels().getFirst().layout().pieceBytes();
        assertEquals(all - 2 * 2 * (2 + 4) * pieceBytes, skipped);
    }

    static int[] blocks(int first, int count) {
        int[] ids = new int[count];
        for (int i = 0; i < count; i++) {
            ids[i] = first + i;
        }
        return ids;
    }

    static List<Piece> emit(TransferPlan plan, StoredObject[] objects, int skip, int chunk) {
        List<Piece> pieces = new ArrayList<>();
        GroupPieces.emit(plan, objects, skip, chunk, (t, to, oo, len) -> pieces.add(new Piece(t, to, oo, len)));
        return pieces;
    }

    /** A pool object for every (chunk, group) the plan moves. */
    static StoredObject[] reserve(TransferPlan plan) {
        long pool = 64L << 20;
        // a region per size class
        ObjectStore store = ReadyStores.of(pool, 8L << 20, EvictionPolicyName.LRU, TimeUnit.SECONDS.toNanos(60), TimeUnit.SECONDS.toNanos(60),
                System::nanoTime, new StoreCounters());
        StoredObject[] objects = new StoredObject[plan.objectCount()];
        for (int j = 0; j < plan.range().count(); j++) {
            for (int g = 0; g < plan.parts().size(); g++) {
                TransferPlan.GroupPart part = plan.parts().get(g);
                if (part.moves(j)) {
                    StoredObject object = store.reserve(ChunkKey.of("m", "", 0, g, j, g), part.objectBytes(), part.format());
                    assertTrue(object.offset() >= 0);
                    objects[plan.objectIndex(j, g)] = object;
                }
            }
        }
        return objects;
    }
}
