package io.lmcache.server.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The shape word and row mapping of head-major pieces ({@code copy_pieces_kv2ltd}'s), checked against KV_2LTD's definition. */
class HeadTransposeTest {
    @Test
    void theShapeWordPacksItsFourFields() {
        long shape = HeadTranspose.shape(8, 16, 5, 256);
        assertEquals(8, HeadTranspose.heads(shape));
        assertEquals(16, HeadTranspose.blockRows(shape));
        assertEquals(5, HeadTranspose.firstRow(shape));
        assertEquals(256, HeadTranspose.rowBytes(shape));
        assertEquals(8L * 16 * 256, HeadTranspose.blockBytes(shape));
        assertTrue(HeadTranspose.shape(1, 1, 0, 1) != 0, "a shape is never the plain piece's 0");
        long widest = HeadTranspose.shape(0xFFFF, 0xFFFF, 0xFFFE, 0xFFFF);
        assertEquals(0xFFFF, HeadTranspose.rowBytes(widest), "the top field reads back unsigned");
        assertFalse(HeadTranspose.fits(8, 16, 0x10000), "a row of 64 KiB does not fit");
        assertFalse(HeadTranspose.fits(0, 16, 256));
        assertThrows(IllegalArgumentException.class, () -> HeadTranspose.shape(8, 16, 16, 256), "the first row is inside the block");
    }

    /** Object row r of a run of whole blocks is block b, token t, head h with r = (b * rows + t) * heads + h: KV_2LTD's order. */
    @Test
    void wholeBlocksMapEachObjectRowToItsHeadMajorRow() {
        int heads = 3;
        int rows = 4;
        int rowBytes = 16;
        long shape = HeadTranspose.shape(heads, rows, 0, rowBytes);
        for (int block = 0; block < 2; block++) {
            for (int token = 0; token < rows; token++) {
                for (int head = 0; head < heads; head++) {
                    long objectRow = ((long) block * rows + token) * heads + head;
                    long headMajor = ((long) block * heads + head) * rows + token; // [block][head][token]
                    assertEquals(headMajor * rowBytes, HeadTranspose.tensorRowOffset(shape, objectRow), "row " + objectRow);
                }
            }
        }
    }

    /** From row 2 on: the object side starts at token 2's first head, the tensor offset stays the block's start. */
    @Test
    void aPartlySkippedBlockMapsItsLastRows() {
        long shape = HeadTranspose.shape(2, 4, 2, 32);
        long[] expected = {(0 * 4 + 2) * 32, (1 * 4 + 2) * 32, (0 * 4 + 3) * 32, (1 * 4 + 3) * 32};
        for (int row = 0; row < expected.length; row++) {
            assertEquals(expected[row], HeadTranspose.tensorRowOffset(shape, row), "object row " + row);
        }
    }

    @Test
    void theKernelIsLookedForInThePtxText() {
        assertTrue(HeadTranspose.ptxHasKernel(".visible .entry copy_pieces(\n.visible .entry copy_pieces_kv2ltd(\n"));
        assertFalse(HeadTranspose.ptxHasKernel(".visible .entry copy_pieces(\n"), "a PTX built before the kernel");
        assertEquals(HeadTranspose.ptxHasKernel(HeadTranspose.readPtx()), HeadTranspose.kernelInPtx(), "read from the committed PTX");
        assertTrue(HeadTranspose.readPtx().contains(".entry copy_pieces("), "the committed PTX is on the class path");
    }
}
