package io.lmcache.server.transfer;

import static io.lmcache.server.transfer.HybridTensors.NHD;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.protocol.DType;
import io.lmcache.server.protocol.EngineGroupInfo;
import io.lmcache.server.protocol.TensorWrapper;
import io.lmcache.server.storage.StoredObject;
import java.util.ArrayList;
import java.util.List;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;

/**
 * DeepSeek-V4(-Flash, V4.1)-shaped registrations (issue 48; hybrid-and-l2.md §A.2.3, §A.3.2): compressed groups
 * ({@code slots_per_chunk = chunk * slots_per_block / tokens_per_block}), sub-chunk windows that keep the last
 * {@code subchunk_sw / tokens_per_block} blocks of each chunk, uint8 and float32 groups, and the scratch ring that is skipped.
 */
class DeepSeekGeometryTest {
    private static final int CHUNK = 256;

    @Test
    void v4FlashGroupsHaveLmcachesPerChunkGeometry() throws Exception {
        CacheGeometry v4 = CacheGeometry.of(HybridTensors.deepseekV4Tensors(64), NHD, HybridTensors.deepseekV4Infos(), CHUNK, true);
        List<KernelGroup> k = v4.kernels();
        assertEquals(List.of(64, 8, 4, 256), k.stream().map(KernelGroup::tokensPerBlock).toList());
        assertEquals(List.of(4, 32, 64, 1), k.stream().map(KernelGroup::blocksPerChunk).toList());
        assertEquals(List.of(2, 32, 64, 1), k.stream().map(KernelGroup::blocksKept).toList(), "window 128 of blocks of 64: the last 2");
        assertEquals(List.of(false, true, true, true), k.stream().map(KernelGroup::compressed).toList());
        // segments [kv_size 1, layers, slots_per_chunk_in_sw, hidden] (LMCache's contiguous_object_shape)
        assertEquals(1L * 2 * 128 * 584, k.get(0).segmentBytes(), "128 window slots of 584-byte records");
        assertEquals(1L * 2 * 64 * 584, k.get(1).segmentBytes(), "ratio 4: 256 tokens in 64 slots");
        assertEquals(1L * 2 * 64 * 32 * 4, k.get(2).segmentBytes(), "float32 indexer, ratio 4");
        assertEquals(1L * 1 * 2 * 584, k.get(3).segmentBytes(), "ratio 128: 256 tokens in 2 slots");
        // --separate-object-groups: the window group apart (one chunk), the rest full attention together
        assertEquals(2, v4.objects().size());
        assertEquals(1, v4.objects().get(0).windowChunks());
        assertEquals(-1, v4.objects().get(1).windowChunks());
        assertArrayEquals(new int[] {0, 1, 1, 1}, v4.objectGroupOfKernel());
        assertEquals(k.get(1).segmentBytes() + k.get(2).segmentBytes() + k.get(3).segmentBytes(), v4.objects().get(1).objectBytes());
        String layout = ObjectGroups.l2Layout(v4.objects().get(1));
        assertTrue(layout.contains("uint8[1,2,64,1x584] tpb8;") && layout.contains("float32[1,2,64,1x32] tpb4;"), layout);
        assertTrue(ObjectGroups.l2Layout(v4.objects().get(0)).contains("uint8[1,2,128,1x584] kept2/4;"));
    }

    @Test
    void aSubChunkWindowMovesOnlyTheLastBlocksOfEachChunk() throws Exception {
        CacheGeometry v4 = CacheGeometry.of(HybridTensors.deepseekV4Tensors(64), NHD, HybridTensors.deepseekV4Infos(), CHUNK, true);
        int[][] ids = {GroupPiecesTest.blocks(1, 8), GroupPiecesTest.blocks(1, 64), GroupPiecesTest.blocks(1, 128), new int[] {5, 6}};
        TransferPlan plan = new TransferPlan(new ChunkRange(0, 2), null, GroupParts.of(v4, 2, ids, true));
        StoredObject[] objects = GroupPiecesTest.reserve(plan);
        List<GroupPiecesTest.Piece> pieces = GroupPiecesTest.emit(plan, objects, 0, CHUNK);
        KvLayout window = v4.kernels().getFirst().layout();
        List<Long> windowBlocks = pieces.stream().filter(p -> p.tensor() < 2)
                .flatMap(p -> blocksOf(p, window).stream()).distinct().sorted().toList();
        assertEquals(List.of(3L, 4L, 7L, 8L), windowBlocks, "chunk 0 keeps ids 3-4 of 1-4, chunk 1 ids 7-8 of 5-8");
        for (int j = 0; j < 2; j++) {
            for (int g = 0; g < 2; g++) {
                StoredObject object = objects[plan.objectIndex(j, g)];
                long end = object.offset() + plan.parts().get(g).objectBytes();
                long filled = pieces.stream().filter(p -> p.objectOffset() >= object.offset() && p.objectOffset() < end)
                        .mapToLong(GroupPiecesTest.Piece::length).sum();
                assertEquals(plan.parts().get(g).objectBytes(), filled, "chunk " + j + " object group " + g + " filled once");
            }
        }
        // the ratio-128 group moves its one block per chunk: id 5, then 6
        KvLayout c128 = v4.kernels().get(3).layout();
        assertEquals(List.of(5L, 6L), pieces.stream().filter(p -> p.tensor() == 6).flatMap(p -> blocksOf(p, c128).stream()).sorted()
                .toList());
    }

    @Test
    void aSkipCountsTokensAndWritesTheSlotsPastIt() throws Exception {
        CacheGeometry v4 = CacheGeometry.of(HybridTensors.deepseekV4Tensors(64), NHD, HybridTensors.deepseekV4Infos(), CHUNK, true);
        KernelGroup window = v4.kernels().get(0);
        KernelGroup c4 = v4.kernels().get(1);
        KernelGroup c128 = v4.kernels().get(3);
        assertEquals(0, SkipRule.keptTokensToSkip(window, 100), "the window starts at token 128");
        assertEquals(32, SkipRule.keptTokensToSkip(window, 160));
        assertEquals(10, SkipRule.keptTokensToSkip(c4, 40), "4 tokens a slot");
        assertEquals(10, SkipRule.keptTokensToSkip(c4, 42), "the slot holding tokens 40-43 is written");
        assertEquals(0, SkipRule.keptTokensToSkip(c128, 100), "a slot of 128 tokens not wholly skipped is written");
        assertEquals(1, SkipRule.keptTokensToSkip(c128, 200));
    }

    @Test
    void v41SkipsTheScratchRingEndToEnd() throws Exception {
        CacheGeometry v41 = CacheGeometry.of(HybridTensors.deepseekV41Tensors(32), NHD, HybridTensors.deepseekV41Infos(), CHUNK, true);
        assertEquals(4, v41.kernels().size(), "the scratch ring forms no kernel group");
        assertEquals(5, v41.blockLists(), "STORE still sends its block list");
        assertArrayEquals(new int[] {0, 0, 1, 1, -1}, v41.objectGroupOfKernel());
        assertEquals(List.of(4, 4, 4, 4), v41.kernels().stream().map(KernelGroup::blocksKept).toList());
        assertEquals(List.of(8, 8, 4, 4), v41.kernels().stream().map(KernelGroup::blocksPerChunk).toList());
        assertEquals(2L * 2 * 128 * 584, v41.objects().get(0).objectBytes(), "two window groups of 128 slots");
        assertEquals(128L * 584 + 128L * 132, v41.objects().get(1).objectBytes(), "ratio 2: 256 tokens in 128 slots");
        assertTrue(v41.builtFrom(HybridTensors.deepseekV41Infos()));
        assertTrue(!v41.builtFrom(HybridTensors.deepseekV4Infos()));

    }

    @Test
    void theAppendedFieldsAreServedWhereTheTensorsAgreeAndRefusedElse() throws Exception {
        List<TensorWrapper> mla = HybridTensors.tensors(2, DType.UINT8, 16, 64, 656);
        accepted(mla, t -> new EngineGroupInfo.Tail(1, "indexer", 656, 512, true, true, 64 * 656, 1, 1, 0));
        refused("cache_role", mla, t -> new EngineGroupInfo.Tail(1, "dense", -1, -1, false, true, -1, -1, 1, 0));
        refused("tokens_per_state 3", mla, t -> new EngineGroupInfo.Tail(3, "sparse", -1, -1, false, true, -1, -1, 1, 0));
        refused("physical_blocks_per_engine_block 2", mla, t -> new EngineGroupInfo.Tail(1, "sparse", -1, -1, false, true, -1, -1, 2, 0));
        refused("null_block_id 7", mla, t -> new EngineGroupInfo.Tail(1, "sparse", -1, -1, false, true, -1, -1, 1, 7));
        refused("num_head_slots 2", mla, t -> new EngineGroupInfo.Tail(1, "sparse", -1, -1, false, true, -1, 2, 1, 0));
        refused("state_content_bytes 584", mla, t -> new EngineGroupInfo.Tail(1, "sparse", 584, -1, false, true, -1, -1, 1, 0));
        refused("page_size_padded 1000", mla, t -> new EngineGroupInfo.Tail(1, "sparse", -1, -1, false, true, 1000, -1, 1, 0));
        refused("block_stride_alignment 1000", mla, t -> new EngineGroupInfo.Tail(1, "sparse", -1, 1000, false, true, -1, -1, 1, 0));
        LayoutException none = assertThrows(LayoutException.class, () -> KernelGroups.detect(mla, NHD,
                List.of(HybridTensors.info(0, new int[] {0, 1}, 64, -1, HybridTensors.tail(1, "sparse", false, false))), CHUNK));
        assertTrue(none.getMessage().contains("no kernel group is prefix_cacheable"), none.getMessage());
    }

    private static void accepted(List<TensorWrapper> tensors, UnaryOperator<EngineGroupInfo.Tail> tail) throws LayoutException {
        KernelGroups.detect(tensors, NHD, List.of(HybridTensors.info(0, new int[] {0, 1}, 64, -1, tail.apply(null))), CHUNK);
    }

    private static void refused(String reason, List<TensorWrapper> tensors, UnaryOperator<EngineGroupInfo.Tail> tail) {
        LayoutException e = assertThrows(LayoutException.class, () -> KernelGroups.detect(tensors, NHD,
                List.of(HybridTensors.info(0, new int[] {0, 1}, 64, -1, tail.apply(null))), CHUNK), reason);
        assertTrue(e.getMessage().contains(reason), "expected '" + reason + "' in: " + e.getMessage());
    }

    /** The block ids a piece covers in its tensor (a run of adjacent blocks is one piece). */
    private static List<Long> blocksOf(GroupPiecesTest.Piece piece, KvLayout layout) {
        List<Long> out = new ArrayList<>();
        long first = piece.tensorOffset() / layout.blockStrideBytes();
        for (long b = 0; b < piece.length() / layout.pieceBytes(); b++) {
            out.add(first + b);
        }
        return out;
    }
}
