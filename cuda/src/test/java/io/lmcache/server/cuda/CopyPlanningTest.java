package io.lmcache.server.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Random;
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
        StagedBatch batch = new StagedBatch(16, false);
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
        StagedBatch batch = new StagedBatch(16, false);
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
        StagedBatch batch = new StagedBatch(16, false);
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
        StagedBatch batch = new StagedBatch(4, false);
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
        StagedBatch batch = new StagedBatch(64, false);
        int next = batch.fill(pieces, 0, new long[] {0}, Direction.TO_POOL, new StagedBatch.Buffer(STAGING, 32 << 20), 2 << 20, REGION);
        assertEquals(2, next, "a 2 MiB budget takes two 1 MiB pieces");
        next = batch.fill(pieces, next, new long[] {0}, Direction.TO_POOL, new StagedBatch.Buffer(STAGING, 32 << 20), 4 << 20, REGION);
        assertEquals(6, next, "the doubled budget takes four");
        next = batch.fill(pieces, next, new long[] {0}, Direction.TO_POOL, new StagedBatch.Buffer(STAGING, 32 << 20), 512 << 10, REGION);
        assertEquals(7, next, "a budget smaller than the piece still takes one (no empty batch, no stall)");
        assertEquals(1L << 20, batch.stagedBytes());
    }

    /**
     * A hybrid chunk is one object per group and its pieces come chunk by chunk, while each group's objects lie side by side in
     * the pool (a size class per region): laid out in pool order, each group's objects of the batch are one DMA run, not one
     * run per object; the descriptors keep the order the pieces came.
     */
    @Test
    void piecesOfInterleavedObjectGroupsAreStagedInPoolOrderSoEachGroupIsOneRun() {
        Pieces pieces = new Pieces();
        long mamba = 136 << 10;
        long attention = 272 << 10;
        for (int chunk = 0; chunk < 4; chunk++) {
            pieces.add(0, chunk * mamba, chunk * mamba, mamba); // group 0's object of this chunk, in region 0
            pieces.add(1, chunk * attention, REGION + chunk * attention, attention); // group 1's, in region 1
        }
        StagedBatch batch = new StagedBatch(16, true);
        long[] bases = {0x1000_0000L, 0x2000_0000L};
        assertEquals(8, batch.fill(pieces, 0, bases, Direction.TO_POOL, new StagedBatch.Buffer(STAGING, 32 << 20), REGION));
        assertEquals(2, batch.runCount(), "one run per group instead of one per object");
        assertEquals(4 * mamba, batch.runBytes(0));
        assertEquals(4 * attention, batch.runBytes(1));
        assertEquals(0x2000_0000L, batch.descriptors()[3], "the second descriptor is still the second piece that came");
        assertEquals(STAGING + 4 * mamba, batch.descriptors()[4], "staged after every group-0 piece");
        assertRunsCarryEveryPiece(pieces, 0, batch, bases, 32 << 20);
        StagedBatch asTheyCame = new StagedBatch(16, false);
        asTheyCame.fill(pieces, 0, bases, Direction.TO_POOL, new StagedBatch.Buffer(STAGING, 32 << 20), REGION);
        assertEquals(8, asTheyCame.runCount(), "with the knob off (the default), each object is a run of its own");
    }

    /** Reordered, the pieces still fit a buffer whose size is not a multiple of the alignment: then they stay as they came. */
    @Test
    void aBufferThatCannotHoldTheReorderedPiecesKeepsTheOrderTheyCame() {
        Pieces pieces = new Pieces();
        pieces.add(0, 0, 4096, 112);
        pieces.add(0, 4096, 0, 100);
        StagedBatch batch = new StagedBatch(16, true);
        assertEquals(2, batch.fill(pieces, 0, new long[] {0}, Direction.TO_POOL, new StagedBatch.Buffer(STAGING, 220), REGION));
        assertEquals(212, batch.stagedBytes(), "in pool order the second piece would end at 224, past the 220-byte buffer");
        assertRunsCarryEveryPiece(pieces, 0, batch, new long[] {0}, 220);
        pieces.clear();
        pieces.add(0, 0, 4096, 112);
        pieces.add(0, 4096, 0, 100);
        batch.fill(pieces, 0, new long[] {0}, Direction.TO_POOL, new StagedBatch.Buffer(STAGING, 224), REGION);
        assertEquals(STAGING + 112, batch.descriptors()[1], "with room, the pool's first piece is staged first");
        assertRunsCarryEveryPiece(pieces, 0, batch, new long[] {0}, 224);
    }

    /** Random pieces over several regions, random budgets and odd lengths: every batch moves every piece's bytes exactly once. */
    @Test
    void everyBatchMovesEachPieceThroughItsOwnStagingRange() {
        Random random = new Random(52);
        for (int round = 0; round < 200; round++) {
            Pieces pieces = new Pieces();
            long[] poolEnd = new long[3];
            int count = 1 + random.nextInt(60);
            for (int i = 0; i < count; i++) {
                int region = random.nextInt(3);
                long length = random.nextBoolean() ? 16L * (1 + random.nextInt(4096)) : 1 + random.nextInt(70_000);
                long pool = region * REGION + poolEnd[region] + (random.nextInt(4) == 0 ? 16 * random.nextInt(8) : 0);
                poolEnd[region] = pool + length - region * REGION;
                pieces.add(random.nextInt(2), 4096L * i, pool, length);
            }
            long stagingBytes = 16L * (1 + random.nextInt(40_000));
            boolean poolOrder = random.nextBoolean();
            StagedBatch batch = new StagedBatch(1 + random.nextInt(32), poolOrder);
            long[] bases = {0x1000_0000L, 0x2000_0000L};
            int from = 0;
            while (from < count) {
                long budget = 16L * (1 + random.nextInt(20_000));
                int next = batch.fill(pieces, from, bases, Direction.TO_POOL, new StagedBatch.Buffer(STAGING, stagingBytes), budget,
                        REGION);
                assertTrue(next > from, "a batch always moves on");
                assertRunsCarryEveryPiece(pieces, from, batch, bases, stagingBytes);
                for (int k = 1; k < batch.pieceCount() && !poolOrder; k++) {
                    assertTrue(batch.descriptors()[3 * k + 1] > batch.descriptors()[3 * k - 2], "off, the pieces are staged as they came");
                }
                from = next;
            }
        }
    }

    /**
     * The batch's descriptors are its pieces in the order they came (from {@code from}, the direct ones skipped), each staged
     * 16-byte aligned inside the buffer, without overlap, and its pool bytes moved by exactly one run to that staging range.
     */
    private static void assertRunsCarryEveryPiece(Pieces pieces, int from, StagedBatch batch, long[] bases, long stagingBytes) {
        long[] d = batch.descriptors();
        long covered = 0;
        long runBytes = 0;
        for (int r = 0; r < batch.runCount(); r++) {
            runBytes += batch.runBytes(r);
            assertEquals(batch.runPoolOffset(r) / REGION, (batch.runPoolOffset(r) + batch.runBytes(r) - 1) / REGION, "a run stays in its region");
        }
        int i = from;
        long[][] ranges = new long[batch.pieceCount()][];
        for (int k = 0; k < batch.pieceCount(); k++, i++) {
            while (StagedBatch.direct(pieces.length(i), stagingBytes)) {
                i++;
            }
            assertEquals(bases[pieces.tensor(i)] + pieces.tensorOffset(i), d[3 * k], "descriptor " + k + " is piece " + i);
            assertEquals(pieces.length(i), d[3 * k + 2]);
            long at = d[3 * k + 1] - STAGING;
            assertEquals(0, at % StagedBatch.ALIGN, "piece " + i + " starts aligned");
            assertTrue(at >= 0 && at + pieces.length(i) <= stagingBytes, "piece " + i + " lies inside the buffer");
            assertTrue(at + pieces.length(i) <= batch.stagedBytes(), "inside what the batch says it uses");
            ranges[k] = new long[] {at, at + pieces.length(i)};
            int carrying = 0;
            for (int r = 0; r < batch.runCount(); r++) {
                long into = pieces.poolOffset(i) - batch.runPoolOffset(r);
                if (into >= 0 && into + pieces.length(i) <= batch.runBytes(r)) {
                    carrying++;
                    assertEquals(at, batch.runStagingOffset(r) + into, "run " + r + " carries piece " + i + " to its staging range");
                }
            }
            assertEquals(1, carrying, "piece " + i + " is in exactly one run");
            covered += pieces.length(i);
        }
        assertEquals(covered, runBytes, "the runs move the pieces' bytes and nothing else");
        Arrays.sort(ranges, (a, b) -> Long.compare(a[0], b[0]));
        for (int k = 1; k < ranges.length; k++) {
            assertTrue(ranges[k][0] >= ranges[k - 1][1], "staging ranges do not overlap");
        }
    }
}
