package io.lmcache.server.transfer;

import static io.lmcache.server.transfer.HybridTensors.NHD;
import static io.lmcache.server.transfer.HybridTensors.info;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.protocol.DType;
import io.lmcache.server.protocol.EngineGroupInfo;
import io.lmcache.server.protocol.TensorWrapper;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Kernel groups from engine_group_infos: per-group layouts, the §A.2.2 rules, and clear refusals. */
class KernelGroupsTest {

    @Test
    void gemmaLikeGroupsHaveTheirOwnBlockSizesAndHeadDims() throws Exception {
        List<KernelGroup> groups = KernelGroups.detect(HybridTensors.gemmaTensors(64), NHD, HybridTensors.gemmaInfos(), 256);
        assertEquals(2, groups.size());
        KernelGroup sliding = groups.get(0);
        assertArrayEquals(new int[] {0, 2}, sliding.tensorIds());
        assertEquals(32, sliding.layout().blockSize());
        assertEquals(256, sliding.layout().headSize());
        assertEquals(8, sliding.blocksPerChunk());
        assertEquals(8, sliding.blocksKept(), "a window of at least a chunk keeps whole chunks");
        assertEquals(4, sliding.windowChunks(256));
        KernelGroup full = groups.get(1);
        assertEquals(16, full.layout().blockSize());
        assertEquals(512, full.layout().headSize());
        assertEquals(16, full.blocksPerChunk());
        assertEquals(-1, full.windowChunks(256));
        assertEquals(sliding.layout().pieceBytes(), full.layout().pieceBytes(), "vLLM unified the page size");
        assertEquals(2 * sliding.segmentBytes(), full.segmentBytes(), "twice the blocks per chunk");
    }

    @Test
    void mambaGroupsKeepTheLastBlockOfEachChunk() throws Exception {
        List<KernelGroup> atN = KernelGroups.detect(HybridTensors.qwenTensors(8, 544), NHD, HybridTensors.qwenInfos(544), 544);
        KernelGroup mamba = atN.get(0);
        assertEquals(GroupKind.RECURRENT, mamba.kind());
        assertEquals(1, mamba.layout().numHeads(), "the re-viewed state page reads as one head");
        assertEquals(1, mamba.blocksKept());
        assertEquals(1, mamba.windowChunks(544));
        // chunk = 2N: two blocks per chunk, only the second (the chunk-end snapshot) moves
        List<KernelGroup> at2N = KernelGroups.detect(HybridTensors.qwenTensors(8, 544), NHD, HybridTensors.qwenInfos(544), 1088);
        assertEquals(2, at2N.get(0).blocksPerChunk());
        assertEquals(1, at2N.get(0).blocksKept());
        assertEquals(1, at2N.get(0).firstKept());
        assertEquals(2, at2N.get(1).blocksKept());
    }

    @Test
    void layersListedInNoGroupAreExcluded() throws Exception {
        // layer 1 shares layer 0's KV (vLLM's KV-sharing layers): no info lists it, and its odd shape is never looked at
        List<TensorWrapper> wrappers = List.of(HybridTensors.tensors(1, DType.BFLOAT16, 2, 16, 16, 2, 64).getFirst(),
                HybridTensors.tensors(1, DType.BFLOAT16, 7, 7).getFirst(), HybridTensors.tensors(1, DType.BFLOAT16, 2, 16, 16, 2, 64).getFirst());
        List<KernelGroup> groups = KernelGroups.detect(wrappers, NHD, List.of(EngineGroupInfo.of(0, new int[] {0, 2})), 256);
        assertArrayEquals(new int[] {0, 2}, groups.getFirst().tensorIds());
        assertEquals(2, groups.getFirst().layout().numLayers());
        assertEquals(16, groups.getFirst().tokensPerBlock(), "tokens_per_block 0 means the tensor's block size");
    }

    @Test
    void noInfosIsOneGroupOfEveryTensor() throws Exception {
        List<KernelGroup> groups = KernelGroups.detect(HybridTensors.tensors(3, DType.BFLOAT16, 2, 16, 16, 2, 64), NHD, List.of(), 256);
        assertEquals(1, groups.size());
        assertArrayEquals(new int[] {0, 1, 2}, groups.getFirst().tensorIds());
        assertEquals(groups.getFirst().blocksPerChunk(), groups.getFirst().blocksKept());
    }

    @Test
    void blockStrideComesFromTheWrapperNotTheShape() throws Exception {
        // two layers' pages interleaved in one buffer: each view's block stride is twice its page
        long[] shape = {10, 2, 16, 1, 64};
        long page = 2 * 16 * 64;
        long[] stride = {2 * page, 16 * 64, 64, 64, 1};
        List<TensorWrapper> wrappers = List.of(HybridTensors.strided(DType.BFLOAT16, shape, stride, 0),
                HybridTensors.strided(DType.BFLOAT16, shape, stride, page));
        KvLayout layout = KernelGroups.detect(wrappers, NHD, List.of(EngineGroupInfo.of(0, new int[] {0, 1})), 256).getFirst().layout();
        assertEquals(2 * page * 2, layout.blockStrideBytes());
        assertEquals(page * 2 + 3 * 2 * page * 2, layout.pieceOffset(1, 0, 3), "layer 1's block 3 sits after layer 0's page");
    }

    @Test
    void fp8CachesAreOpaqueBytesWhoseDtypeIsPartOfTheFormat() throws Exception {
        // fp8_ds_mla: uint8 records of 656 bytes per token, one plane
        List<TensorWrapper> fp8 = HybridTensors.tensors(2, DType.UINT8, 16, 64, 656);
        KernelGroup mla = KernelGroups.detect(fp8, NHD, List.of(EngineGroupInfo.of(0, new int[] {0, 1})), 256).getFirst();
        assertEquals(KvLayout.Kind.MLA, mla.layout().kind());
        assertEquals(64L * 656, mla.layout().pieceBytes());
        // a bf16 cache of half the width has pieces of the same size: its objects must not be read as fp8 ones
        List<TensorWrapper> bf16 = HybridTensors.tensors(2, DType.BFLOAT16, 16, 64, 328);
        KernelGroup other = KernelGroups.detect(bf16, NHD, List.of(EngineGroupInfo.of(0, new int[] {0, 1})), 256).getFirst();
        assertEquals(mla.segmentBytes(), other.segmentBytes());
        assertNotEquals(mla.layout().format(), other.layout().format());
        KernelGroup e4m3 = KernelGroups.detect(HybridTensors.tensors(2, DType.FLOAT8_E4M3FN, 16, 64, 656), NHD,
                List.of(EngineGroupInfo.of(0, new int[] {0, 1})), 256).getFirst();
        assertNotEquals(mla.layout().format(), e4m3.layout().format());
    }

    @Test
    void refusesGeometriesItCannotServeWithTheReason() {
        List<TensorWrapper> blocks16 = HybridTensors.tensors(2, DType.BFLOAT16, 2, 32, 16, 2, 64);
        refused("tokens_per_block 24 is not a multiple of the 16 slots", blocks16, List.of(info(0, new int[] {0, 1}, 24, -1, false)), 256);
        refused("not a multiple of the 16 slots", blocks16, List.of(info(0, new int[] {0, 1}, 8, -1, false)), 256);
        refused("is not a multiple of tokens_per_block 16", blocks16, List.of(info(0, new int[] {0, 1}, 16, 120, false)), 256);
        refused("must divide the chunk size 200", blocks16, List.of(info(0, new int[] {0, 1}, 16, -1, false)), 200);
        refused("recurrent-state group's sw_size_tokens 24", blocks16, List.of(info(0, new int[] {0, 1}, 16, 24, true)), 256);
        refused("recurrent-state group's sw_size_tokens 512", blocks16, List.of(info(0, new int[] {0, 1}, 16, 512, true)), 256);
        refused("sw_size_tokens 0", blocks16, List.of(info(0, new int[] {0, 1}, 16, 0, false)), 256);
        refused("outside the 2 registered tensors", blocks16, List.of(EngineGroupInfo.of(0, new int[] {0, 2})), 256);
        refused("listed by kernel group 0 too", blocks16, List.of(EngineGroupInfo.of(0, new int[] {0}), EngineGroupInfo.of(1, new int[] {0})),
                256);
        refused("lists no layers", blocks16, List.of(EngineGroupInfo.of(0, new int[0])), 256);
        refused("differ in dtype, shape", HybridTensors.concat(blocks16, HybridTensors.tensors(1, DType.BFLOAT16, 2, 32, 32, 2, 64)),
                List.of(EngineGroupInfo.of(0, new int[] {0, 2})), 256);
        refused("extra_object_group_tag -1", blocks16, List.of(new EngineGroupInfo(0, new int[] {0, 1}, 16, -1, -1, false)), 256);
    }

    private static void refused(String reason, List<TensorWrapper> wrappers, List<EngineGroupInfo> infos, int chunk) {
        LayoutException e = assertThrows(LayoutException.class, () -> KernelGroups.detect(wrappers, NHD, infos, chunk), reason);
        assertTrue(e.getMessage().contains(reason), "expected '" + reason + "' in: " + e.getMessage());
    }
}
