package io.lmcache.server.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The GPU copy planning, host-only: which pieces go straight to DMA, how the rest are packed into staging batches. */
class CopyPlanningTest {
    private static final long STAGING = 0x7e00_0000_0000L;
    private static final long REGION = 256L << 20;

    @Test
    void smallPiecesArePackedIntoStagingInBothDirections() {
        Pieces pieces = new Pieces();
        pieces.add(0, 4096, 0, 32 << 10);
        pieces.add(1, 8192, 32 << 10, 32 << 10);
        long[] bases = {0x1000_0000L, 0x2000_0000L};
        StagedBatch batch = new StagedBatch(16);
        assertEquals(2, batch.fill(pieces, 0, bases, Direction.TO_POOL, new StagedBatch.Buffer(STAGING, 32 << 20), REGION));
        assertEquals(2, batch.pieceCount());
        assertArrayEquals(new long[] {0x1000_0000L + 4096, STAGING, 32 << 10, 0x2000_0000L + 8192, STAGING + (32 << 10), 32 << 10},
                Arrays.copyOf(batch.descriptors(), 6), "a STORE gathers the GPU blocks into the staging buffer");
        assertEquals(1, batch.runCount(), "pool-contiguous pieces are one DMA run");
        assertEquals(0, batch.runPoolOffset(0));
        assertEquals(0, batch.runStagingOffset(0));
        assertEquals(64 << 10, batch.runBytes(0));
        batch.fill(pieces, 0, bases, Direction.FROM_POOL, new StagedBatch.Buffer(STAGING, 32 << 20), REGION);
        assertEquals(STAGING, batch.descriptors()[0], "a RETRIEVE scatters from the staging buffer");
        assertEquals(0x1000_0000L + 4096, batch.descriptors()[1], "into the GPU block");
    }

    @Test
    void runsBreakWhereThePoolIsNotContiguousOrARegionEnds() {
        Pieces pieces = new Pieces();
        pieces.add(0, 0, REGION - (32 << 10), 32 << 10); // the last piece of region 0
        pieces.add(0, 1 << 20, REGION, 32 << 10); // adjacent in the pool, but region 1
        pieces.add(0, 2 << 20, REGION + (1 << 20), 32 << 10); // a gap in the pool
        StagedBatch batch = new StagedBatch(16);
        batch.fill(pieces, 0, new long[] {0}, Direction.TO_POOL, new StagedBatch.Buffer(STAGING, 32 << 20), REGION);
        assertEquals(3, batch.runCount());
        assertEquals(REGION, batch.runPoolOffset(1));
        assertEquals(32 << 10, batch.runStagingOffset(1));
        assertEquals(64 << 10, batch.runStagingOffset(2));
    }

    @Test
    void onlyPiecesLargerThanTheStagingBufferGoStraightToDmaAndFullBatchesStop() {
        long stagingBytes = 2L << 20; // four 512 KiB pieces
        assertFalse(StagedBatch.direct(stagingBytes, stagingBytes));
        assertTrue(StagedBatch.direct(stagingBytes + 1, stagingBytes));
        Pieces pieces = new Pieces();
        pieces.add(0, 0, 0, 4 << 20); // direct
        for (int i = 0; i < 5; i++) {
            pieces.add(0, (4L << 20) + i * (512 << 10), (4L << 20) + i * (512 << 10), 512 << 10);
        }
        StagedBatch batch = new StagedBatch(16);
        int next = batch.fill(pieces, 0, new long[] {0}, Direction.TO_POOL, new StagedBatch.Buffer(STAGING, stagingBytes), REGION);
        assertEquals(4, batch.pieceCount());
        assertEquals(5, next, "the 4 MiB piece is skipped, the fifth small one waits for the next batch");
        assertEquals(2L << 20, batch.stagedBytes());
        assertEquals(4L << 20, batch.runPoolOffset(0));
        next = batch.fill(pieces, next, new long[] {0}, Direction.TO_POOL, new StagedBatch.Buffer(STAGING, stagingBytes), REGION);
        assertEquals(6, next);
        assertEquals(1, batch.pieceCount());
        assertEquals(0, batch.runStagingOffset(0), "a new batch starts at the beginning of its half");
    }

    @Test
    void aBatchTakesNoMoreThanADescriptorSlotAndKeepsPiecesAligned() {
        Pieces pieces = new Pieces();
        for (int i = 0; i < 10; i++) {
            pieces.add(0, 100L * i, 100L * i, 100); // 100 bytes: not a multiple of 16
        }
        StagedBatch batch = new StagedBatch(4);
        assertEquals(4, batch.fill(pieces, 0, new long[] {0}, Direction.TO_POOL, new StagedBatch.Buffer(STAGING, 32 << 20), REGION));
        assertEquals(4, batch.pieceCount());
        for (int i = 0; i < 4; i++) {
            assertEquals(0, (batch.descriptors()[3 * i + 1] - STAGING) % 16, "piece " + i + " starts 16-byte aligned");
        }
        assertEquals(4, batch.runCount(), "the alignment gap in staging breaks the pool run");
        assertEquals(3 * 112 + 100, batch.stagedBytes());
    }

    @Test
    void piecesGrowAndTotal() {
        Pieces pieces = new Pieces();
        for (int i = 0; i < 10_000; i++) {
            pieces.add(i % 3, i, 2L * i, 7);
        }
        assertEquals(10_000, pieces.count());
        assertEquals(70_000, pieces.totalBytes());
        assertEquals(9_999 % 3, pieces.tensor(9_999));
        assertEquals(2L * 9_999, pieces.poolOffset(9_999));
        pieces.clear();
        assertEquals(0, pieces.count());
    }

    @Test
    void uuidsAreMatchedInTorchsFormat() {
        byte[] raw = new byte[16];
        for (int i = 0; i < 16; i++) {
            raw[i] = (byte) (0x18 + i);
        }
        assertEquals("18191a1b-1c1d-1e1f-2021-222324252627", CudaDevices.formatUuid(raw));
        assertEquals("184cee46-72c4-7743-a092-b1281e71db2f", CudaDevices.normalizeUuid("GPU-184CEE46-72c4-7743-a092-b1281e71db2f"));
    }

    @Test
    void theKernelPtxShipsInTheJar() throws Exception {
        try (var in = CopyEngine.class.getResourceAsStream("copy_pieces.ptx")) {
            String ptx = new String(in.readAllBytes(), StandardCharsets.US_ASCII);
            assertTrue(ptx.contains(".entry copy_pieces("), "the entry point the engine launches");
        }
    }

    /** The engine's small first batches: a budget below the buffer ends a batch early, but never before its first piece. */
    @Test
    void aBatchBudgetEndsTheBatchEarlyButAlwaysTakesOnePiece() {
        Pieces pieces = new Pieces();
        for (int i = 0; i < 8; i++) {
            pieces.add(0, (long) i << 20, (long) i << 20, 1 << 20); // 1 MiB pieces
        }
        StagedBatch batch = new StagedBatch(64);
        int next = batch.fill(pieces, 0, new long[] {0}, Direction.TO_POOL, new StagedBatch.Buffer(STAGING, 32 << 20), 2 << 20, REGION);
        assertEquals(2, next, "a 2 MiB budget takes two 1 MiB pieces");
        next = batch.fill(pieces, next, new long[] {0}, Direction.TO_POOL, new StagedBatch.Buffer(STAGING, 32 << 20), 4 << 20, REGION);
        assertEquals(6, next, "the doubled budget takes four");
        next = batch.fill(pieces, next, new long[] {0}, Direction.TO_POOL, new StagedBatch.Buffer(STAGING, 32 << 20), 512 << 10, REGION);
        assertEquals(7, next, "a budget smaller than the piece still takes one (no empty batch, no stall)");
        assertEquals(1L << 20, batch.stagedBytes());
    }
}
