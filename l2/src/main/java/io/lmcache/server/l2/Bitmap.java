package io.lmcache.server.l2;

import java.util.Arrays;

/**
 * A fixed-size packed bitset, LMCache's native {@code Bitmap}: bit i answers for {@code keys[i]}
 * of one task. Not thread-safe; a result bitmap belongs to whoever took it.
 */
public final class Bitmap {
    private final int size;
    private final long[] words;

    public Bitmap(int size) {
        if (size < 0) {
            throw new IllegalArgumentException("size " + size);
        }
        this.size = size;
        this.words = new long[(size + 63) >>> 6];
    }

    public static Bitmap allSet(int size) {
        Bitmap bitmap = new Bitmap(size);
        for (int i = 0; i < size; i++) {
            bitmap.set(i);
        }
        return bitmap;
    }

    public int size() {
        return size;
    }

    public void set(int i) {
        words[index(i)] |= 1L << i;
    }

    public void clear(int i) {
        words[index(i)] &= ~(1L << i);
    }

    public boolean get(int i) {
        return (words[index(i)] & (1L << i)) != 0;
    }

    public int popcount() {
        int count = 0;
        for (long word : words) {
            count += Long.bitCount(word);
        }
        return count;
    }

    /** Set bits from index 0 up to the first clear one. */
    public int countLeadingOnes() {
        for (int w = 0; w < words.length; w++) {
            if (words[w] != -1L) {
                return Math.min(size, (w << 6) + Long.numberOfTrailingZeros(~words[w]));
            }
        }
        return size;
    }

    /** The indices of the set bits, ascending. */
    public int[] indices() {
        int[] out = new int[popcount()];
        int at = 0;
        for (int i = 0; i < size; i++) {
            if (get(i)) {
                out[at++] = i;
            }
        }
        return out;
    }

    public Bitmap and(Bitmap other) {
        Bitmap out = copy();
        for (int w = 0; w < words.length; w++) {
            out.words[w] &= other.words[w];
        }
        return out;
    }

    public Bitmap or(Bitmap other) {
        Bitmap out = copy();
        for (int w = 0; w < words.length; w++) {
            out.words[w] |= other.words[w];
        }
        return out;
    }

    public Bitmap not() {
        Bitmap out = new Bitmap(size);
        for (int i = 0; i < size; i++) {
            if (!get(i)) {
                out.set(i);
            }
        }
        return out;
    }

    public Bitmap copy() {
        Bitmap out = new Bitmap(size);
        System.arraycopy(words, 0, out.words, 0, words.length);
        return out;
    }

    private int index(int i) {
        if (i < 0 || i >= size) {
            throw new IndexOutOfBoundsException("bit " + i + " of " + size);
        }
        return i >>> 6;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Bitmap other && other.size == size && Arrays.equals(other.words, words);
    }

    @Override
    public int hashCode() {
        return 31 * size + Arrays.hashCode(words);
    }

    @Override
    public String toString() {
        StringBuilder out = new StringBuilder(size);
        for (int i = 0; i < size; i++) {
            out.append(get(i) ? '1' : '0');
        }
        return out.toString();
    }
}
