package io.lmcache.server.l2;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class BitmapTest {
    @Test
    void leadingOnesPopcountAndOperators() {
        Bitmap keys = new Bitmap(70);
        for (int i : new int[] {0, 1, 3, 4, 64, 69}) {
            keys.set(i);
        }
        assertEquals(2, keys.countLeadingOnes(), "keys {0,1,3,4} load only {0,1}");
        assertEquals(6, keys.popcount());
        assertArrayEquals(new int[] {0, 1, 3, 4, 64, 69}, keys.indices());
        assertEquals(70, Bitmap.allSet(70).countLeadingOnes());
        assertEquals(keys, keys.not().not());
        assertEquals(Bitmap.allSet(70), keys.or(keys.not()));
        Bitmap other = new Bitmap(70);
        other.set(2);
        assertEquals(5, keys.or(other).countLeadingOnes());
        assertEquals(0, keys.and(other).popcount());
        assertEquals(64, keys.not().popcount());
        keys.clear(0);
        assertEquals(0, keys.countLeadingOnes());
        assertEquals(0, new Bitmap(0).countLeadingOnes());
        assertThrows(IndexOutOfBoundsException.class, () -> keys.set(70));
    }
}
