package io.lmcache.server.module;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.lmcache.server.transfer.GroupKind;
import io.lmcache.server.transfer.LookupGeometry;
import org.junit.jupiter.api.Test;

/** The largest prefix every object group can serve (§A.5): full attention needs [0, L), a window of w chunks [L - w, L). */
class LookupFoldTest {
    private static final GroupKind A = GroupKind.ATTENTION;

    @Test
    void aOneChunkWindowNeedsOnlyTheLastChunk() {
        LookupGeometry geometry = new LookupGeometry(new int[] {-1, 1}, new GroupKind[] {A, GroupKind.RECURRENT});
        boolean[][] present = {bits("111"), bits("001")};
        assertEquals(3, LookupFold.largestPrefix(geometry, present, 3));
        assertEquals(0, LookupFold.largestPrefix(geometry, present, 2), "the first two chunks have no snapshot at their end");
        assertEquals(2, LookupFold.firstKept(geometry, 1, 3));
        assertEquals(0, LookupFold.firstKept(geometry, 0, 3));
    }

    @Test
    void theHitIsTheLargestLengthEveryGroupServes() {
        LookupGeometry geometry = new LookupGeometry(new int[] {-1, 2}, new GroupKind[] {A, A});
        assertEquals(3, LookupFold.largestPrefix(geometry, new boolean[][] {bits("11110"), bits("01101")}, 5),
                "L=4 needs window chunks 2..3; L=3 has 1..2");
        assertEquals(2, LookupFold.largestPrefix(geometry, new boolean[][] {bits("11000"), bits("11111")}, 5),
                "the full-attention prefix bounds it");
        assertEquals(1, LookupFold.largestPrefix(geometry, new boolean[][] {bits("11111"), bits("10001")}, 5),
                "a window shorter than L needs min(w, L) chunks: L=1 needs chunk 0 only");
        assertEquals(0, LookupFold.largestPrefix(geometry, new boolean[][] {bits("11111"), bits("00000")}, 5));
    }

    @Test
    void windowedOnlyModelsAndAuxGroups() {
        LookupGeometry windowed = new LookupGeometry(new int[] {2}, new GroupKind[] {A});
        assertEquals(4, LookupFold.largestPrefix(windowed, new boolean[][] {bits("00110")}, 5));
        LookupGeometry withAux = new LookupGeometry(new int[] {-1, -1}, new GroupKind[] {A, GroupKind.AUX});
        assertEquals(3, LookupFold.largestPrefix(withAux, new boolean[][] {bits("111"), bits("000")}, 3), "an aux group constrains nothing");
    }

    private static boolean[] bits(String text) {
        boolean[] out = new boolean[text.length()];
        for (int i = 0; i < out.length; i++) {
            out[i] = text.charAt(i) == '1';
        }
        return out;
    }
}
