package io.lmcache.server.transfer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.cuda.Direction;
import io.lmcache.server.cuda.HeadTranspose;
import io.lmcache.server.cuda.Pieces;
import io.lmcache.server.cuda.StagedBatch;
import io.lmcache.server.protocol.LayoutHints;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * The GPU path's descriptors for head-major layouts, without a GPU: the planner's pieces go through the staged batch
 * (descriptor triples and shape words as the launch writes them) and a Java model of {@code copy_pieces_kv2ltd} (the same
 * unit arithmetic as {@code tensor_unit} in copy_pieces.cu) over one byte array standing for device memory, then the batch's
 * DMA runs to the pool. The object must be {@code KV_2LTD} worked from its definition, and the scatter back must restore
 * the blocks, from a row inside a block too.
 */
class GpuDescriptorsTest {
    private static final int LAYERS = 2;
    private static final int BLOCKS = 8;
    private static final int BS = 4;
    private static final int HEADS = 3;
    private static final int HS = 8;
    private static final int CHUNK = 16;
    private static final int STAGING = 1 << 16;
    private static final int POOL = 2 << 16;

    /** Device memory: the layers' tensors from 0, the staging buffer at {@link #STAGING}, and the pool (DMA'd) at {@link #POOL}. */
    private static final class Memory {
        final byte[] bytes = new byte[3 << 16];
        final long[] bases = new long[LAYERS];
    }

    /** One element's bytes (bf16): its identity, so every misplaced element shows. */
    private static byte[] element(int plane, int layer, int block, int row, int head, int d) {
        int v = ((((plane * LAYERS + layer) * BLOCKS + block) * BS + row) * HEADS + head) * HS + d + 1;
        return new byte[] {(byte) v, (byte) (v >>> 8)};
    }

    private static long tensorElement(boolean fused, int plane, int block, int row, int head, int d) {
        return fused ? (((long) block * HEADS + head) * BS + row) * 2 * HS + plane * HS + d
                : ((((long) plane * BLOCKS + block) * HEADS + head) * BS + row) * HS + d;
    }

    private static long tensorBytes(KvLayout layout) {
        return (long) BLOCKS * layout.planes() * layout.pieceBytes();
    }

    private static Memory filled(boolean fused, KvLayout layout) {
        Memory memory = new Memory();
        long tensorBytes = tensorBytes(layout);
        for (int layer = 0; layer < LAYERS; layer++) {
            memory.bases[layer] = layer * tensorBytes;
            for (int plane = 0; plane < 2; plane++) {
                for (int block = 0; block < BLOCKS; block++) {
                    for (int row = 0; row < BS; row++) {
                        for (int head = 0; head < HEADS; head++) {
                            for (int d = 0; d < HS; d++) {
                                int at = (int) (memory.bases[layer] + 2 * tensorElement(fused, plane, block, row, head, d));
                                System.arraycopy(element(plane, layer, block, row, head, d), 0, memory.bytes, at, 2);
                            }
                        }
                    }
                }
            }
        }
        return memory;
    }

    /** The chunk of {@code blocks}, by KV_2LTD's definition ({@code [2, L, T, nh*hs]}; fused {@code [1, L, T, nh*2hs]}). */
    private static byte[] kv2ltd(boolean fused, int[] blocks) {
        int tokens = blocks.length * BS;
        byte[] out = new byte[2 * LAYERS * tokens * HEADS * HS * 2];
        for (int plane = 0; plane < 2; plane++) {
            for (int layer = 0; layer < LAYERS; layer++) {
                for (int token = 0; token < tokens; token++) {
                    for (int head = 0; head < HEADS; head++) {
                        for (int d = 0; d < HS; d++) {
                            long e = fused ? ((long) (layer * tokens + token) * HEADS + head) * 2 * HS + plane * HS + d
                                    : (((long) plane * LAYERS + layer) * tokens + token) * HEADS * HS + head * HS + d;
                            byte[] v = element(plane, layer, blocks[token / BS], token % BS, head, d);
                            System.arraycopy(v, 0, out, (int) (2 * e), 2);
                        }
                    }
                }
            }
        }
        return out;
    }

    /**
     * {@code copy_pieces_kv2ltd} in Java: for each descriptor, units of 16 bytes (1 when unaligned), object-side index i in
     * order, tensor-side unit from tensor_unit's arithmetic; {@code toObject}: src is the tensor.
     */
    static void kernel(byte[] memory, long[] triples, long[] shapes, int n, boolean toObject) {
        for (int p = 0; p < n; p++) {
            int src = (int) triples[3 * p];
            int dst = (int) triples[3 * p + 1];
            int bytes = (int) triples[3 * p + 2];
            long shape = shapes[p];
            if (shape == 0) {
                System.arraycopy(memory, src, memory, dst, bytes);
                continue;
            }
            int heads = HeadTranspose.heads(shape);
            int rows = HeadTranspose.blockRows(shape);
            int first = HeadTranspose.firstRow(shape);
            int rowBytes = HeadTranspose.rowBytes(shape);
            int unit = ((src | dst | rowBytes) & 15) == 0 ? 16 : 1;
            int perRow = rowBytes / unit;
            int perBlock = heads * (rows - first);
            for (int i = 0; i < bytes / unit; i++) {
                int row = i / perRow;
                int col = i - row * perRow;
                int block = row / perBlock;
                int within = row - block * perBlock;
                int token = within / heads;
                int head = within - token * heads;
                int t = ((block * heads + head) * rows + first + token) * perRow + col;
                int from = src + (toObject ? t : i) * unit;
                int to = dst + (toObject ? i : t) * unit;
                System.arraycopy(memory, from, memory, to, unit);
            }
        }
    }

    private static Pieces plan(KvLayout layout, int[] blocks, int skip) {
        return plan(layout, blocks, skip, false);
    }

    /** The planner's pieces, or with {@code reversed} the same pieces last first (out of pool order, as a hybrid chunk's groups). */
    private static Pieces plan(KvLayout layout, int[] blocks, int skip, boolean reversed) {
        Pieces pieces = new Pieces();
        PiecePlanner.chunk(layout, blocks, 0, blocks.length, skip, POOL, PieceSink.of(pieces::add));
        if (!reversed) {
            return pieces;
        }
        Pieces out = new Pieces();
        for (int i = pieces.count() - 1; i >= 0; i--) {
            out.add(pieces.tensor(i), pieces.tensorOffset(i), pieces.poolOffset(i), pieces.length(i), pieces.shape(i));
        }
        return out;
    }

    /** The staged batch and kernel model of one direction, then the DMA runs between staging and pool. */
    private static StagedBatch run(Memory memory, Pieces pieces, Direction direction) {
        return run(memory, pieces, direction, false);
    }

    private static StagedBatch run(Memory memory, Pieces pieces, Direction direction, boolean poolOrder) {
        StagedBatch batch = new StagedBatch(4096, poolOrder);
        int next = batch.fill(pieces, 0, memory.bases, direction, new StagedBatch.Buffer(STAGING, STAGING), 1L << 30);
        assertEquals(pieces.count(), next, "one batch");
        boolean toPool = direction == Direction.TO_POOL;
        if (!toPool) {
            dma(memory, batch, false);
        }
        kernel(memory.bytes, batch.descriptors(), batch.shapes(), batch.pieceCount(), toPool);
        if (toPool) {
            dma(memory, batch, true);
        }
        return batch;
    }

    private static void dma(Memory memory, StagedBatch batch, boolean toPool) {
        for (int r = 0; r < batch.runCount(); r++) {
            int pool = (int) batch.runPoolOffset(r);
            int staged = (int) (STAGING + batch.runStagingOffset(r));
            int bytes = (int) batch.runBytes(r);
            System.arraycopy(memory.bytes, toPool ? staged : pool, memory.bytes, toPool ? pool : staged, bytes);
        }
    }

    private static void roundTrip(boolean fused, KvLayout layout) {
        roundTrip(fused, layout, false, false);
    }

    /** {@code reversed}: the pieces come last first; {@code poolOrder}: the batch stages them in pool order ({@code -Dlmcache.cuda.stageInPoolOrder}). */
    private static void roundTrip(boolean fused, KvLayout layout, boolean reversed, boolean poolOrder) {
        int[] blocks = {5, 6, 1, 2}; // runs of adjacent blocks and a jump
        Memory memory = filled(fused, layout);
        Pieces pieces = plan(layout, blocks, 0, reversed);
        for (int i = 0; i < pieces.count(); i++) {
            assertTrue(pieces.shape(i) != 0, "every piece of a head-major layout has a shape");
        }
        StagedBatch batch = run(memory, pieces, Direction.TO_POOL, poolOrder);
        if (reversed) {
            assertEquals(poolOrder ? 1 : pieces.count(), batch.runCount(), "in pool order the object is one run, else a run a piece");
        }
        assertTrue(batch.transposes(), "the batch needs the transposing kernel");
        int objectBytes = (int) layout.objectBytes(CHUNK);
        byte[] object = Arrays.copyOfRange(memory.bytes, POOL, POOL + objectBytes);
        assertArrayEquals(kv2ltd(fused, blocks), object, "the gathered object is KV_2LTD");

        // RETRIEVE into other blocks, the first 5 tokens skipped (one whole block and a row of the next)
        int[] target = {0, 3, 4, 7};
        for (int layer = 0; layer < LAYERS; layer++) {
            Arrays.fill(memory.bytes, (int) memory.bases[layer], (int) (memory.bases[layer] + tensorBytes(layout)), (byte) 0);
        }
        run(memory, plan(layout, target, 5, reversed), Direction.FROM_POOL, poolOrder);
        for (int layer = 0; layer < LAYERS; layer++) {
            for (int plane = 0; plane < 2; plane++) {
                for (int k = 0; k < target.length; k++) {
                    for (int row = 0; row < BS; row++) {
                        boolean skipped = k * BS + row < 5;
                        for (int head = 0; head < HEADS; head++) {
                            for (int d = 0; d < HS; d++) {
                                int at = (int) (memory.bases[layer] + 2 * tensorElement(fused, plane, target[k], row, head, d));
                                byte[] expected = skipped ? new byte[2] : element(plane, layer, blocks[k], row, head, d);
                                assertArrayEquals(expected, Arrays.copyOfRange(memory.bytes, at, at + 2),
                                        "layer " + layer + " plane " + plane + " block " + target[k] + " row " + row + " head " + head);
                            }
                        }
                    }
                }
            }
        }
    }

    @Test
    void hndBlocksGatherToKv2ltdAndScatterBack() throws Exception {
        KvLayout layout = LayoutDetector.detect(LayoutDetectorTest.layers(LAYERS, 2, BLOCKS, HEADS, BS, HS), new LayoutHints("HND", 0, 0, 0),
                CHUNK);
        assertTrue(layout.transposes());
        assertEquals(HS * 2, layout.rowBytes(), "16-byte rows: the kernel's wide path");
        roundTrip(false, layout);
    }

    /** Pieces out of pool order, staged in pool order (one DMA run) or as they came: the same object, the same blocks back. */
    @Test
    void piecesOutOfPoolOrderGatherTheSameObjectStagedEitherWay() throws Exception {
        KvLayout layout = LayoutDetector.detect(LayoutDetectorTest.layers(LAYERS, 2, BLOCKS, HEADS, BS, HS), new LayoutHints("HND", 0, 0, 0),
                CHUNK);
        roundTrip(false, layout, true, true);
        roundTrip(false, layout, true, false);
    }

    @Test
    void fusedHndBlocksGatherToPackedRowsAndScatterBack() throws Exception {
        KvLayout layout = LayoutDetector.detect(LayoutDetectorTest.layers(LAYERS, BLOCKS, HEADS, BS, 2 * HS),
                new LayoutHints("HND", 0, 0, 0), CHUNK);
        assertEquals(KvLayout.Kind.FUSED, layout.kind());
        assertTrue(layout.transposes());
        roundTrip(true, layout);
    }

    @Test
    void unalignedRowsTakeTheBytewisePath() throws Exception {
        // head size 4 in bf16: 8-byte rows, the kernel copies them byte by byte
        KvLayout layout = LayoutDetector.detect(LayoutDetectorTest.layers(1, 2, 4, 2, 4, 4), new LayoutHints("HND", 0, 0, 0), 8);
        Memory memory = new Memory();
        for (int i = 0; i < 2 * 4 * 2 * 4 * 4 * 2; i++) {
            memory.bytes[i] = (byte) (i * 7 + 1);
        }
        Pieces pieces = plan(layout, new int[] {1, 2}, 0);
        run(memory, pieces, Direction.TO_POOL);
        for (int plane = 0; plane < 2; plane++) {
            for (int token = 0; token < 8; token++) {
                for (int head = 0; head < 2; head++) {
                    int block = 1 + token / 4;
                    int tensor = ((((plane * 4 + block) * 2 + head) * 4) + token % 4) * 8;
                    int object = POOL + ((plane * 8 + token) * 2 + head) * 8;
                    assertArrayEquals(Arrays.copyOfRange(memory.bytes, tensor, tensor + 8), Arrays.copyOfRange(memory.bytes, object, object + 8),
                            "plane " + plane + " token " + token + " head " + head);
                }
            }
        }
    }
}
