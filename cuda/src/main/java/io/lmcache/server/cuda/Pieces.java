package io.lmcache.server.cuda;

import java.util.Arrays;

/**
 * A growable list of copy pieces, four longs each: the registered tensor, the byte offset in it,
 * the byte offset in the pool, and the length. Reused per transfer lane, so planning a transfer
 * allocates nothing once it has grown.
 */
public final class Pieces {
    private long[] data = new long[4 * 256];
    private int count;
    private long totalBytes;

    public void clear() {
        count = 0;
        totalBytes = 0;
    }

    public void add(int tensor, long tensorOffset, long poolOffset, long length) {
        if (4 * (count + 1) > data.length) {
            data = Arrays.copyOf(data, data.length * 2);
        }
        int at = 4 * count++;
        data[at] = tensor;
        data[at + 1] = tensorOffset;
        data[at + 2] = poolOffset;
        data[at + 3] = length;
        totalBytes += length;
    }

    public int count() {
        return count;
    }

    public int tensor(int piece) {
        return (int) data[4 * piece];
    }

    public long tensorOffset(int piece) {
        return data[4 * piece + 1];
    }

    public long poolOffset(int piece) {
        return data[4 * piece + 2];
    }

    public long length(int piece) {
        return data[4 * piece + 3];
    }

    public long totalBytes() {
        return totalBytes;
    }
}
