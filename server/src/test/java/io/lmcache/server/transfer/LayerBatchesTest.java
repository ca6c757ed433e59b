package io.lmcache.server.transfer;

import static io.lmcache.server.transfer.HybridTensors.NHD;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.protocol.DType;
import io.lmcache.server.storage.StoredObject;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** LMCache's layer-wise batches (--layerwise-batch): which layers each batch copies, and the frame that names it. */
class LayerBatchesTest {

    @Test
    void aDenseModelIsCutIntoBatchesOfNLayersInRegistrationOrder() throws Exception {
        CacheGeometry llama = CacheGeometry.of(HybridTensors.tensors(6, DType.BFLOAT16, 2, 64, 16, 8, 128), NHD, List.of(), 256, true);
        LayerBatches batches = LayerBatches.of(llama, 4);
        assertEquals(2, batches.count());
        assertArrayEquals(new int[] {0, 1, 2, 3}, batches.layers(0));
        assertArrayEquals(new int[] {4, 5}, batches.layers(1));
        assertEquals(4, batches.leader(1), "a batch's event is its first layer's");
        assertArrayEquals(ints(0, 4, 0), ints(batches.frame(0)), "(first_layer, count, pool_index), as futures_layerwise reads it");
        assertArrayEquals(ints(4, 2, 4), ints(batches.frame(1)));
        assertEquals(6, LayerBatches.of(llama, 1).count(), "N = 1: one event per layer");
        assertEquals(1, LayerBatches.of(llama, 256).count());
    }

    @Test
    void aScatteredBatchNamesItsLayersInTheLayerMajorFrame() {
        assertArrayEquals(ints(-1, 3, 2, 2, 5, 9), ints(LayerBatches.frame(new int[] {2, 5, 9})),
                "(-1, n, leader) + the n indices (lmcache_driven_transfer_layerwise.py@1565d9a3)");
    }

    @Test
    void aHybridModelsBatchesSpanItsKernelGroupsAndCopyEachLayerOnce() throws Exception {
        CacheGeometry gemma = CacheGeometry.of(HybridTensors.gemmaTensors(64), NHD, HybridTensors.gemmaInfos(), 256, true);
        LayerBatches batches = LayerBatches.of(gemma, 2);
        KernelGroup sliding = gemma.kernels().get(0);
        KernelGroup full = gemma.kernels().get(1);
        assertTrue(batches.includes(0, sliding.index(), 0) && batches.includes(0, full.index(), 0), "layers 0 and 1 (tensors 0, 1)");
        assertTrue(batches.includes(1, sliding.index(), 1) && batches.includes(1, full.index(), 1), "layers 2 and 3");
        assertFalse(batches.includes(0, sliding.index(), 1));

        int[][] ids = {GroupPiecesTest.blocks(0, 16), GroupPiecesTest.blocks(20, 32)};
        TransferPlan plan = new TransferPlan(new ChunkRange(0, 2), null, GroupParts.of(gemma, 2, ids, false));
        StoredObject[] objects = GroupPiecesTest.reserve(plan);
        Set<GroupPiecesTest.Piece> all = new HashSet<>(GroupPiecesTest.emit(plan, objects, 0, 256));
        List<GroupPiecesTest.Piece> byBatch = new ArrayList<>();
        for (int b = 0; b < batches.count(); b++) {
            List<GroupPiecesTest.Piece> batch = new ArrayList<>();
            GroupPieces.emitLayers(plan, objects, 0, 256, batches, b, (t, to, oo, len) -> batch.add(new GroupPiecesTest.Piece(t, to, oo, len)));
            int[] tensors = batch.stream().mapToInt(GroupPiecesTest.Piece::tensor).distinct().sorted().toArray();
            assertArrayEquals(batches.layers(b), tensors, "batch " + b + " copies exactly its layers' tensors");
            byBatch.addAll(batch);
        }
        assertEquals(all.size(), byBatch.size(), "no piece twice");
        assertEquals(all, new HashSet<>(byBatch), "the batches together copy what a per-chunk RETRIEVE copies");
    }

    @Test
    void aCrossLayerTensorHasNoPerLayerEvents() throws Exception {
        CacheGeometry crossLayer = CacheGeometry.of(HybridTensors.tensors(1, DType.BFLOAT16, 32, 6, 2, 16, 4, 64), NHD, List.of(), 256, true);
        assertEquals(KvLayout.Kind.CROSS_LAYER, crossLayer.kernels().getFirst().layout().kind());
        assertThrows(LayoutException.class, () -> LayerBatches.of(crossLayer, 2));
    }

    private static int[] ints(int... values) {
        return values;
    }

    private static int[] ints(byte[] frame) {
        ByteBuffer in = ByteBuffer.wrap(frame).order(ByteOrder.LITTLE_ENDIAN);
        int[] out = new int[frame.length / 4];
        for (int i = 0; i < out.length; i++) {
            out[i] = in.getInt();
        }
        return out;
    }
}
