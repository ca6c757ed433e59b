package io.lmcache.server.transfer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.lmcache.server.protocol.EngineGroupInfo;
import io.lmcache.server.protocol.LayoutHints;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

class PiecePlannerTest {
    /** {@code shape}: a head-major piece's ({@code cuda.HeadTranspose}), 0 for a plain one. */
    private record Piece(int tensor, long tensorOffset, long objectOffset, long length, long shape) {}

    private static List<Piece> plan(KvLayout layout, int[] blocks, int skip) {
        List<Piece> pieces = new ArrayList<>();
        PiecePlanner.chunk(layout, blocks, 0, blocks.length, skip, 1000,
                PieceSink.of((t, to, oo, len, shape) -> pieces.add(new Piece(t, to, oo, len, shape))));
        return pieces;
    }

    @Test
    void adjacentBlocksMergeAndEveryObjectByteIsWrittenOnce() throws Exception {
        // FlashAttention NHD, 2 layers, blocks of 16 tokens, chunk of 4 blocks
        KvLayout layout = LayoutDetector.detect(LayoutDetectorTest.layers(2, 2, 32, 16, 2, 8), new LayoutHints("NHD", 0, 0, 0), 64);
        List<Piece> pieces = plan(layout, new int[] {4, 5, 6, 9}, 0);
        // per plane and layer: [4,5,6] as one run, [9] alone
        assertEquals(2 * 2 * 2, pieces.size());
        Piece first = pieces.getFirst();
        assertEquals(3 * layout.pieceBytes(), first.length());
        assertEquals(4 * layout.pieceBytes(), first.tensorOffset());
        assertEquals(1000, first.objectOffset());
        long covered = pieces.stream().mapToLong(Piece::length).sum();
        assertEquals(layout.objectBytes(64), covered);
        long[] objectOffsets = pieces.stream().mapToLong(Piece::objectOffset).sorted().toArray();
        long expected = 1000;
        for (long offset : objectOffsets) {
            assertEquals(expected, offset, "object ranges are back to back");
            expected += pieces.stream().filter(p -> p.objectOffset() == offset).findFirst().orElseThrow().length();
        }
    }

    @Test
    void theFirstPieceIsTheLeadingRunOfTheFirstChunksKeptBlocks() throws Exception {
        KvLayout nhd = LayoutDetector.detect(LayoutDetectorTest.layers(2, 2, 32, 16, 2, 8), new LayoutHints("NHD", 0, 0, 0), 64);
        KernelGroup all = new KernelGroup(0, 0, new int[] {0, 1}, nhd, 16, EngineGroupInfo.FULL_ATTENTION, 0, false, 4, 4);
        for (int[] ids : new int[][] {{4, 5, 6, 9, 1, 2}, {4, 7, 8, 9}, {0, 1, 2, 3, 4, 5, 6, 7}}) {
            assertEquals(plan(nhd, Arrays.copyOf(ids, 4), 0).getFirst().length(), PiecePlanner.firstPieceBytes(all, ids),
                    "what chunk() emits first for " + Arrays.toString(ids));
        }
        assertEquals(4 * nhd.pieceBytes(), PiecePlanner.firstPieceBytes(all, new int[] {0, 1, 2, 3, 4, 5, 6, 7}), "a run ends with the chunk");
        assertEquals(2 * nhd.pieceBytes(), PiecePlanner.firstPieceBytes(all, new int[] {3, 4}), "or with a list too short");
        assertEquals(nhd.pieceBytes(), PiecePlanner.firstPieceBytes(all, new int[0]));
        assertEquals(nhd.pieceBytes(), PiecePlanner.firstPieceBytes(all, null));
        // a window that keeps the last 2 of 4 blocks: the run starts at the first kept one
        KernelGroup window = new KernelGroup(0, 0, new int[] {0, 1}, nhd, 16, 32, 0, false, 4, 2);
        assertEquals(2 * nhd.pieceBytes(), PiecePlanner.firstPieceBytes(window, new int[] {9, 1, 20, 21}));
        // FlashInfer: K and V of a block lie between it and the next, so blocks never merge
        KvLayout flashInfer = LayoutDetector.detect(LayoutDetectorTest.layers(1, 32, 2, 16, 2, 8), new LayoutHints("NHD", 0, 0, 0), 64);
        KernelGroup interleaved = new KernelGroup(0, 0, new int[] {0}, flashInfer, 16, EngineGroupInfo.FULL_ATTENTION, 0, false, 4, 4);
        assertEquals(flashInfer.pieceBytes(), PiecePlanner.firstPieceBytes(interleaved, new int[] {0, 1, 2, 3}));
    }

    @Test
    void flashInferBlocksNeverMerge() throws Exception {
        KvLayout layout = LayoutDetector.detect(LayoutDetectorTest.layers(1, 32, 2, 16, 2, 8), new LayoutHints("NHD", 0, 0, 0), 64);
        List<Piece> pieces = plan(layout, new int[] {0, 1, 2, 3}, 0);
        assertEquals(2 * 4, pieces.size(), "K and V of a block are interleaved with the next block's");
    }

    @Test
    void skipLeavesWholeBlocksThenRowsOfThePartialOne() throws Exception {
        KvLayout nhd = LayoutDetector.detect(LayoutDetectorTest.layers(1, 2, 32, 16, 2, 8), new LayoutHints("NHD", 0, 0, 0), 64);
        List<Piece> pieces = plan(nhd, new int[] {0, 1, 2, 3}, 20);
        long rowBytes = nhd.rowBytes();
        // plane 0: block 1 from row 4 on, then blocks 2..3 merged
        assertArrayEquals(new long[] {nhd.pieceBytes() + 4 * rowBytes, 1000 + nhd.pieceBytes() + 4 * rowBytes, 12 * rowBytes},
                new long[] {pieces.get(0).tensorOffset(), pieces.get(0).objectOffset(), pieces.get(0).length()});
        assertEquals(2 * nhd.pieceBytes(), pieces.get(1).length());
        KvLayout hnd = LayoutDetector.detect(LayoutDetectorTest.layers(1, 2, 32, 2, 16, 8), new LayoutHints("HND", 0, 0, 0), 64);
        List<Piece> hndPieces = plan(hnd, new int[] {0, 1, 2, 3}, 20);
        // plane 0: block 1 from token 4 on, one piece (the object holds it token-major: both heads of tokens 4..15), then
        // blocks 2..3 as one run; the tensor offsets are the blocks' starts, the shapes say the rest
        long tokenBytes = 2 * hnd.rowBytes();
        assertEquals(new Piece(0, hnd.pieceBytes(), 1000 + hnd.pieceBytes() + 4 * tokenBytes, 12 * tokenBytes, hnd.transposeShape(4)),
                hndPieces.get(0));
        assertEquals(new Piece(0, 2 * hnd.pieceBytes(), 1000 + 2 * hnd.pieceBytes(), 2 * hnd.pieceBytes(), hnd.transposeShape(0)),
                hndPieces.get(1));
        assertEquals(2 * 2, hndPieces.size(), "two pieces per plane");
        KernelGroup hndGroup = new KernelGroup(0, 0, new int[] {0}, hnd, 16, EngineGroupInfo.FULL_ATTENTION, 0, false, 4, 4);
        assertEquals(0, PiecePlanner.firstPieceBytes(hndGroup, new int[] {0, 1, 2, 3}), "a transfer of head-major pieces starts with the kernel");
        assertEquals(0, plan(nhd, new int[] {0, 1, 2, 3}, 64).size(), "a skip past the chunk copies nothing");
    }
}
