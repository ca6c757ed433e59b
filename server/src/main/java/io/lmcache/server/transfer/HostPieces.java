package io.lmcache.server.transfer;

import io.lmcache.server.cuda.HeadTranspose;
import java.lang.foreign.MemorySegment;
import java.util.function.IntFunction;

/**
 * The pieces of one host-path copy, gathered in emission order (which is the pool objects' order, so neighbours in the list
 * are mostly neighbours in memory), then copied as {@code groups} runs of about equal bytes: group {@code g} copies the bytes
 * of the concatenated pieces in {@code [g * bytes / groups, (g + 1) * bytes / groups)}. A plain piece may be cut at a group's
 * border; a head-major piece belongs whole to the group its first byte falls in (its rows are not contiguous in the tensor).
 * Every byte is copied by exactly one group, so the groups may run on different threads at once.
 */
final class HostPieces implements PieceSink {
    private static final int FIELDS = 5; // tensor, tensor offset, object offset, length, shape (0: plain)
    private long[] pieces = new long[FIELDS * 64];
    private int count;
    private long bytes;

    @Override
    public void piece(int tensor, long tensorOffset, long objectOffset, long length) {
        add(tensor, tensorOffset, objectOffset, length, 0);
    }

    @Override
    public void transposed(int tensor, long tensorOffset, long objectOffset, long length, long shape) {
        add(tensor, tensorOffset, objectOffset, length, shape);
    }

    private void add(int tensor, long tensorOffset, long objectOffset, long length, long shape) {
        if (length <= 0) {
            return;
        }
        if (count * FIELDS == pieces.length) {
            long[] more = new long[pieces.length * 2];
            System.arraycopy(pieces, 0, more, 0, pieces.length);
            pieces = more;
        }
        int at = count++ * FIELDS;
        pieces[at] = tensor;
        pieces[at + 1] = tensorOffset;
        pieces[at + 2] = objectOffset;
        pieces[at + 3] = length;
        pieces[at + 4] = shape;
        bytes += length;
    }

    long bytes() {
        return bytes;
    }

    int count() {
        return count;
    }

    /**
     * The first byte (of the concatenated pieces) that group {@code group} of {@code groups} copies: cuts fall on multiples of
     * 4 KiB of the run, so a run of page-aligned pieces (blocks are whole KiB) is cut at page borders.
     */
    long groupStart(int group, int groups) {
        return group >= groups ? bytes : (bytes / groups * group) & ~4095L;
    }

    /**
     * Copies group {@code group} of {@code groups} between the tensors and the pool, in the direction given. Walks from the
     * first piece each time: a copy has at most some thousands of pieces and a group copies megabytes.
     */
    void copyGroup(int group, int groups, IntFunction<MemorySegment> tensors, MemorySegment pool, boolean toPool) {
        long from = groupStart(group, groups);
        long to = groupStart(group + 1, groups);
        long start = 0;
        for (int i = 0; i < count && start < to; i++) {
            int at = i * FIELDS;
            long length = pieces[at + 3];
            long end = start + length;
            long shape = pieces[at + 4];
            if (shape != 0) {
                if (start >= from) {
                    transpose(tensors.apply((int) pieces[at]), pieces[at + 1], pool, pieces[at + 2], length, shape, toPool);
                }
            } else if (end > from) {
                long skip = Math.max(0, from - start);
                long take = Math.min(end, to) - start - skip;
                copy(tensors.apply((int) pieces[at]), pieces[at + 1] + skip, pool, pieces[at + 2] + skip, take, toPool);
            }
            start = end;
        }
    }

    private static void copy(MemorySegment tensor, long tensorOffset, MemorySegment pool, long objectOffset, long length, boolean toPool) {
        if (toPool) {
            MemorySegment.copy(tensor, tensorOffset, pool, objectOffset, length);
        } else {
            MemorySegment.copy(pool, objectOffset, tensor, tensorOffset, length);
        }
    }

    /** A head-major piece, row by row into (or out of) the object's token-major order, as the GPU kernel maps it. */
    private static void transpose(MemorySegment tensor, long tensorOffset, MemorySegment pool, long objectOffset, long length, long shape,
            boolean toPool) {
        long rowBytes = HeadTranspose.rowBytes(shape);
        long rows = length / rowBytes;
        for (long row = 0; row < rows; row++) {
            copy(tensor, tensorOffset + HeadTranspose.tensorRowOffset(shape, row), pool, objectOffset + row * rowBytes, rowBytes, toPool);
        }
    }
}
