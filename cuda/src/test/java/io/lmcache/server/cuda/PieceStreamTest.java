package io.lmcache.server.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.config.Tuning;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** How a transfer's pieces become batches while they are still being added: the engine's lanes, host-only. */
class PieceStreamTest {
    private static final long KIB = 1L << 10;
    private static final long MIB = 1L << 20;
    private static final long STAGING = 0x7e00_0000_0000L;
    private static final long REGION = 256L << 20;

    /** What the lane would enqueue, recorded: each batch's pieces and bytes, and how many pieces existed when it was cut. */
    private static final class Recorder implements PieceStream.Target {
        final StagedBatch batch;
        final long halfBytes;
        final List<long[]> batches = new ArrayList<>(); // {pieces added so far, pieces in the batch, staged bytes, budget}
        final List<Integer> direct = new ArrayList<>();
        final List<Integer> addedWhenDirect = new ArrayList<>();

        Recorder(int maxPieces, long halfBytes) {
            this.batch = new StagedBatch(maxPieces, false);
            this.halfBytes = halfBytes;
        }

        @Override
        public void direct(Pieces pieces, int piece) {
            direct.add(piece);
            addedWhenDirect.add(pieces.count());
        }

        @Override
        public int batch(Pieces pieces, int from, long budgetBytes) {
            int next = batch.fill(pieces, from, new long[] {0}, Direction.TO_POOL, new StagedBatch.Buffer(STAGING, halfBytes), budgetBytes, REGION);
            batches.add(new long[] {pieces.count(), batch.pieceCount(), batch.stagedBytes(), budgetBytes});
            return next;
        }

        final List<long[]> records = new ArrayList<>(); // {pool index, pieces staged before it}

        @Override
        public void record(LayerEvents events, int index) {
            records.add(new long[] {index, stagedPieces()});
        }

        long stagedPieces() {
            return batches.stream().mapToLong(b -> b[1]).sum();
        }
    }

    private static PieceStream stream(long halfBytes, int maxPieces, long firstBytes, Recorder target) {
        PieceStream stream = new PieceStream(halfBytes, maxPieces, Tuning.defaults().batchGrowth());
        stream.begin(firstBytes, target);
        return stream;
    }

    @Test
    void aLayerBatchEndSendsItsPiecesBeforeItsEventIsRecorded() {
        Recorder target = new Recorder(4096, 32 * MIB);
        PieceStream stream = stream(32 * MIB, 4096, 32 * MIB, target); // a budget no layer fills: only the batch end cuts
        for (int layer = 0; layer < 4; layer++) {
            for (int i = 0; i < 16; i++) {
                stream.add(0, (layer * 16L + i) * 64 * 1024, (layer * 16L + i) * 32 * 1024, 32 * 1024);
            }
            if (layer % 2 == 1) {
                stream.endLayerBatch(null, layer - 1);
            }
        }
        stream.finish();
        assertEquals(2, target.records.size());
        assertArrayEquals(new long[] {0, 32}, target.records.get(0), "layers 0-1's 32 pieces are staged before event 0");
        assertArrayEquals(new long[] {2, 64}, target.records.get(1), "and layers 2-3's before event 2");
    }

    @Test
    void theFirstBatchIsCutBeforeTheRestOfTheTransferIsPlanned() {
        Recorder target = new Recorder(4096, 32 * MIB);
        PieceStream stream = stream(32 * MIB, 4096, 2 * MIB, target);
        for (int i = 0; i < 1024; i++) { // one Llama-8B chunk: 1 024 pieces of 32 KiB
            stream.add(0, i * 32 * KIB, i * 32 * KIB, 32 * KIB);
        }
        assertEquals(64, target.batches.getFirst()[0], "the 2 MiB batch went when its 64th piece arrived, 960 before the last");
        assertEquals(4, target.batches.size(), "2 + 4 + 8 + 16 MiB cut while adding; the last 2 MiB waits for finish");
        stream.finish();
        List<Long> bytes = target.batches.stream().map(b -> b[2]).toList();
        assertEquals(List.of(2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB, 2 * MIB), bytes, "doubling per batch, as before streaming");
        assertEquals(1024, target.stagedPieces());
        assertEquals(32 * MIB, stream.pieces().totalBytes());
    }

    @Test
    void behindOtherTransfersBatchesAreWholeHalvesAndNeverLarger() {
        Recorder target = new Recorder(4096, 32 * MIB);
        PieceStream stream = stream(32 * MIB, 4096, 32 * MIB, target);
        for (int i = 0; i < 3 * 1024; i++) {
            stream.add(0, i * 32 * KIB, i * 32 * KIB, 32 * KIB);
        }
        stream.finish();
        assertEquals(List.of(32 * MIB, 32 * MIB, 32 * MIB), target.batches.stream().map(b -> b[2]).toList());
        assertEquals(List.of(1024L, 2048L, 3072L), target.batches.stream().map(b -> b[0]).toList(), "each cut as its half filled");
    }

    @Test
    void piecesLargerThanAHalfGoStraightToDmaTheMomentTheyArrive() {
        Recorder target = new Recorder(4096, 2 * MIB);
        PieceStream stream = stream(2 * MIB, 4096, 2 * MIB, target);
        stream.add(0, 0, 0, 512 * KIB);
        stream.add(0, MIB, MIB, 4 * MIB); // direct
        stream.add(0, 8 * MIB, 8 * MIB, 512 * KIB);
        assertEquals(List.of(1), target.direct);
        assertEquals(List.of(2), target.addedWhenDirect, "sent when added, not when a batch is cut");
        assertEquals(0, target.batches.size(), "1 MiB of small pieces is below the 2 MiB budget");
        stream.finish();
        assertEquals(1, target.batches.size());
        assertEquals(2, target.batches.getFirst()[1], "the batch skips the direct piece");
        assertEquals(MIB, target.batches.getFirst()[2]);
    }

    @Test
    void aFullDescriptorSlotCutsABatchBelowItsBudget() {
        Recorder target = new Recorder(4, 32 * MIB);
        PieceStream stream = stream(32 * MIB, 4, 2 * MIB, target);
        for (int i = 0; i < 10; i++) {
            stream.add(0, i * KIB, i * KIB, KIB);
        }
        assertEquals(2, target.batches.size(), "two slots of 4 pieces, far below 2 MiB");
        stream.finish();
        assertEquals(List.of(4L, 4L, 2L), target.batches.stream().map(b -> b[1]).toList());
    }

    @Test
    void piecesLeftOutOfABatchByAlignmentGoWithTheNext() {
        Recorder target = new Recorder(4096, 32 * MIB);
        PieceStream stream = stream(32 * MIB, 4096, 1000, target);
        for (int i = 0; i < 10; i++) {
            stream.add(0, 100L * i, 100L * i, 100); // 100 bytes: each staged at a 16-byte boundary
        }
        stream.finish();
        assertEquals(10, target.stagedPieces(), "every piece staged exactly once");
        long budget = 1000;
        for (long[] b : target.batches) {
            assertEquals(budget, b[3], "the budget doubles per batch");
            budget = 2 * budget;
            assertTrue(b[2] <= b[3], "a batch stays within its budget");
        }
    }

    @Test
    void aTransferWithNoPiecesCutsNothingAndTheStreamIsReusable() {
        Recorder target = new Recorder(4096, 32 * MIB);
        PieceStream stream = stream(32 * MIB, 4096, 2 * MIB, target);
        stream.finish();
        assertEquals(0, target.batches.size());
        assertEquals(0, stream.pieces().count());
        stream.begin(2 * MIB, target);
        stream.add(0, 0, 0, KIB);
        stream.finish();
        assertEquals(1, target.batches.size());
        assertEquals(KIB, stream.pieces().totalBytes(), "begin cleared the previous transfer's pieces");
    }

    /**
     * A run of head-major blocks (HND) larger than a staging half is cut into runs of whole blocks that fit, never sent as a
     * direct DMA (which cannot transpose); each part keeps its shape, and the batch says it needs the transposing kernel.
     */
    @Test
    void headMajorRunsAreCutIntoWholeBlocksAndStaged() {
        long half = 100 * KIB;
        Recorder target = new Recorder(4096, half);
        PieceStream stream = stream(half, 4096, half, target);
        long shape = HeadTranspose.shape(8, 16, 0, 256); // 32 KiB blocks
        stream.add(0, 0, 1000, 8 * 32 * KIB, shape);
        stream.finish();
        assertTrue(target.direct.isEmpty(), "nothing goes by DMA");
        Pieces pieces = stream.pieces();
        assertEquals(3, pieces.count(), "3 + 3 + 2 blocks of 32 KiB in halves of 100 KiB");
        long[] lengths = {96 * KIB, 96 * KIB, 64 * KIB};
        long at = 0;
        for (int i = 0; i < pieces.count(); i++) {
            assertEquals(lengths[i], pieces.length(i));
            assertEquals(at, pieces.tensorOffset(i), "each part starts at a block");
            assertEquals(1000 + at, pieces.poolOffset(i));
            assertEquals(shape, pieces.shape(i));
            at += lengths[i];
        }
        assertTrue(target.batch.transposes());
        assertEquals(shape, target.batch.shapes()[0]);
        assertEquals(8 * 32 * KIB, pieces.totalBytes());
    }

    @Test
    void aHeadMajorBlockLargerThanAHalfIsRefused() {
        Recorder target = new Recorder(4096, 16 * KIB);
        PieceStream stream = stream(16 * KIB, 4096, 16 * KIB, target);
        CudaException refused = assertThrows(CudaException.class,
                () -> stream.add(0, 0, 0, 32 * KIB, HeadTranspose.shape(8, 16, 0, 256)));
        assertTrue(refused.getMessage().contains("larger than a staging half"), refused.getMessage());
    }
}
