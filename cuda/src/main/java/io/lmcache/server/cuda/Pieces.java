package io.lmcache.server.cuda;

import java.util.Arrays;

/**
 * A growable list of copy pieces, five longs each: the registered tensor, the byte offset in it,
 * the byte offset in the pool, the length, and the shape of a head-major piece the object holds
 * token-major ({@link HeadTranspose}; 0 for a plain copy). Reused per transfer lane, so planning a transfer
 * allocates nothing once it has grown.
 */
public final class Pieces {
    private long[] data = new long[5 * 256];
    private int count;
    private long totalBytes;

    public void clear() {
        count = 0;
        totalBytes = 0;
    }

    public void add(int tensor, long tensorOffset, long poolOffset, long length) {
        add(tensor, tensorOffset, poolOffset, length, 0);
    }

    /** A piece; {@code shape} non-zero: a head-major piece copied into (or out of) token-major order ({@link HeadTranspose}). */
    public void add(int tensor, long tensorOffset, long poolOffset, long length, long shape) {
        if (5 * (count + 1) > data.length) {
            data = Arrays.copyOf(data, data.length * 2);
        }
        int at = 5 * count++;
        data[at] = tensor;
        data[at + 1] = tensorOffset;
        data[at + 2] = poolOffset;
        data[at + 3] = length;
        data[at + 4] = shape;
        totalBytes += length;
    }

    public int count() {
        return count;
    }

    public int tensor(int piece) {
        return (int) data[5 * piece];
    }

    public long tensorOffset(int piece) {
        return data[5 * piece + 1];
    }

    public long poolOffset(int piece) {
        return data[5 * piece + 2];
    }

    public long length(int piece) {
        return data[5 * piece + 3];
    }

    /** The piece's {@link HeadTranspose} shape, 0 for a plain copy. */
    public long shape(int piece) {
        return data[5 * piece + 4];
    }

    public long totalBytes() {
        return totalBytes;
    }
}
