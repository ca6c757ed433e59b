package io.lmcache.server.transfer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.cuda.HeadTranspose;
import io.lmcache.server.protocol.DType;
import io.lmcache.server.protocol.LayoutHints;
import io.lmcache.server.protocol.TensorWrapper;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class LayoutDetectorTest {
    private static final LayoutHints NHD = new LayoutHints("NHD", 0, 0, 0);
    private static final LayoutHints HND = new LayoutHints("HND", 0, 0, 0);

    static long[] contiguous(long... shape) {
        long[] stride = new long[shape.length];
        long step = 1;
        for (int i = shape.length - 1; i >= 0; i--) {
            stride[i] = step;
            step *= shape[i];
        }
        return stride;
    }

    static List<TensorWrapper> layers(int count, long... shape) {
        long elements = 1;
        for (long d : shape) {
            elements *= d;
        }
        List<TensorWrapper> tensors = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            tensors.add(new TensorWrapper.CpuShm("/t" + i, elements * 2, DType.BFLOAT16, shape, contiguous(shape), 0, "cpu"));
        }
        return tensors;
    }

    @Test
    void flashAttentionNhd() throws Exception {
        KvLayout layout = LayoutDetector.detect(layers(4, 2, 96, 16, 8, 128), NHD, 256);
        assertEquals(KvLayout.Kind.FLASH_ATTENTION, layout.kind());
        assertEquals(16, layout.blockSize());
        assertEquals(8, layout.numHeads());
        assertEquals(96, layout.numBlocks());
        assertEquals(4, layout.numLayers());
        assertEquals(16 * 8 * 128 * 2, layout.pieceBytes(), "the 32 KiB pieces of Llama-8B");
        assertEquals(layout.pieceBytes(), layout.blockStrideBytes(), "a layer's blocks are adjacent");
        assertEquals(96L * layout.pieceBytes(), layout.planeStrideBytes());
        assertEquals(2L * 4 * 16 * layout.pieceBytes(), layout.objectBytes(256));
        assertEquals(KvLayout.tokenMajorFormat(2, DType.BFLOAT16), layout.format());
        assertEquals(2L * 4 * 8 * 128 * 2, layout.bytesPerToken());
    }

    @Test
    void flashAttentionHndReadsBlockSizeFromTheOtherDim() throws Exception {
        KvLayout layout = LayoutDetector.detect(layers(2, 2, 64, 8, 16, 128), HND, 256);
        assertTrue(layout.hnd());
        assertEquals(16, layout.blockSize());
        assertEquals(8, layout.numHeads());
        assertEquals(8, layout.subBlocks());
        assertEquals(128 * 2, layout.rowBytes());
        assertTrue(layout.transposes(), "a CPU worker's HND blocks are transposed into token-major objects");
        assertTrue(layout.lmcacheObjectLayout());
        assertEquals(KvLayout.tokenMajorFormat(2, DType.BFLOAT16), layout.format(), "HND and NHD objects are one format");
        KvLayout nhd = LayoutDetector.detect(layers(2, 2, 64, 16, 8, 128), NHD, 256);
        assertEquals(nhd.segmentFormat(16), layout.segmentFormat(16), "and L2 records one format for both");
        assertEquals("bfloat16[2,2,256,8x128]", layout.segmentFormat(16));

        // the block-order fallback (a GPU whose PTX lacks the transposing kernel): named apart, as before
        KvLayout blockOrder = layout.withBlockOrder();
        assertFalse(blockOrder.transposes());
        assertFalse(blockOrder.lmcacheObjectLayout());
        assertTrue(blockOrder.format() != KvLayout.tokenMajorFormat(2, DType.BFLOAT16), "block-order objects are tagged apart");
        assertEquals("bfloat16[2,2,256,8x128] hnd16", blockOrder.segmentFormat(16));
        assertTrue(nhd.withBlockOrder().lmcacheObjectLayout(), "NHD blocks have no block order of their own");
    }

    @Test
    void aGpuWorkersHndBlocksAreTransposedOnlyWhenThePtxHasTheKernel() throws Exception {
        KvLayout layout = LayoutDetector.detect(layers(2, 2, 64, 8, 16, 128), HND, 256);
        TensorWrapper gpu = new TensorWrapper.RawCudaIpc(new byte[64], 0, 1 << 30, DType.BFLOAT16, new long[] {2, 64, 8, 16, 128},
                contiguous(2, 64, 8, 16, 128), 0, "GPU-0");
        assertEquals(HeadTranspose.kernelInPtx(), LayoutDetector.canTranspose(gpu, layout), "read from the PTX the copy engine loads");
        assertTrue(LayoutDetector.canTranspose(layers(1, 2, 64, 8, 16, 128).getFirst(), layout), "the host path always transposes");
        KvLayout wide = LayoutDetector.detect(layers(1, 2, 4, 2, 16, 65536), HND, 256);
        assertFalse(wide.transposes(), "a row the shape word cannot hold keeps the block order");
    }

    @Test
    void fusedNhdIsLmcachesLayoutAndFusedHndIsTransposed() throws Exception {
        KvLayout nhd = LayoutDetector.detect(layers(2, 64, 16, 4, 128), NHD, 256);
        assertTrue(nhd.lmcacheObjectLayout(), "LMCache stores fused rows as they are: [1, L, T, nh x 2 hs]");
        assertFalse(nhd.transposes());
        KvLayout hnd = LayoutDetector.detect(layers(2, 64, 4, 16, 128), HND, 256);
        assertTrue(hnd.transposes());
        assertEquals(128 * 2, hnd.rowBytes(), "a head's packed K and V row");
        assertEquals(nhd.format(), hnd.format());
        assertEquals("bfloat16[1,2,256,4x64] fused", hnd.segmentFormat(16));
        assertEquals(nhd.segmentFormat(16), hnd.segmentFormat(16));
    }

    @Test
    void flashInferBlocksFirst() throws Exception {
        KvLayout layout = LayoutDetector.detect(layers(3, 64, 2, 16, 4, 64), NHD, 256);
        assertEquals(KvLayout.Kind.FLASH_INFER, layout.kind());
        assertEquals(2 * layout.pieceBytes(), layout.blockStrideBytes());
        assertEquals(layout.pieceBytes(), layout.planeStrideBytes());
    }

    @Test
    void fusedAndMlaAreSinglePlane() throws Exception {
        KvLayout fused = LayoutDetector.detect(layers(2, 64, 16, 4, 128), NHD, 256);
        assertEquals(KvLayout.Kind.FUSED, fused.kind());
        assertEquals(1, fused.planes());
        assertEquals(64, fused.headSize());
        KvLayout mla = LayoutDetector.detect(layers(61, 128, 64, 576), LayoutHints.NONE, 256);
        assertEquals(KvLayout.Kind.MLA, mla.kind());
        assertEquals(64, mla.blockSize());
        assertEquals(KvLayout.tokenMajorFormat(1, DType.BFLOAT16), mla.format());
    }

    @Test
    void crossLayerSingleTensor() throws Exception {
        KvLayout layout = LayoutDetector.detect(layers(1, 32, 6, 2, 16, 4, 64), NHD, 256);
        assertEquals(KvLayout.Kind.CROSS_LAYER, layout.kind());
        assertEquals(6, layout.numLayers());
        assertEquals(32, layout.numBlocks());
        assertEquals(0, layout.tensorIndex(5));
        assertEquals(layout.pieceBytes() * 2, layout.layerStrideBytes());
    }

    @Test
    void refusesWhatItCannotServe() {
        LayoutException shape = assertThrows(LayoutException.class, () -> LayoutDetector.detect(layers(2, 7, 7), NHD, 256));
        assertTrue(shape.getMessage().contains("[7, 7]"), shape.getMessage());
        LayoutException block = assertThrows(LayoutException.class,
                () -> LayoutDetector.detect(layers(2, 2, 10, 24, 4, 64), NHD, 256));
        assertTrue(block.getMessage().contains("block size 24"), block.getMessage());
        List<TensorWrapper> mixed = new ArrayList<>(layers(1, 2, 10, 16, 4, 64));
        mixed.addAll(layers(1, 2, 12, 16, 4, 64));
        assertThrows(LayoutException.class, () -> LayoutDetector.detect(mixed, NHD, 256));
        long[] shapeDims = {2, 10, 16, 4, 64};
        long[] padded = {10 * 16 * 4 * 64, 16 * 4 * 64, 4 * 64 * 2, 64, 1};
        List<TensorWrapper> strided = List.of(new TensorWrapper.CpuShm("/x", 1 << 22, DType.BFLOAT16, shapeDims, padded, 0, "cpu"));
        assertThrows(LayoutException.class, () -> LayoutDetector.detect(strided, NHD, 256));
        List<TensorWrapper> tooSmall = List.of(new TensorWrapper.CpuShm("/x", 100, DType.BFLOAT16, new long[] {2, 10, 16, 4, 64},
                contiguous(2, 10, 16, 4, 64), 0, "cpu"));
        LayoutException span = assertThrows(LayoutException.class, () -> LayoutDetector.detect(tooSmall, NHD, 256));
        assertFalse(span.getMessage().isEmpty());
    }
}
