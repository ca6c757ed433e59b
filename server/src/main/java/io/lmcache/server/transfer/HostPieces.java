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
    private static final int FIELDS = 6; // tensor, tensor offset, object offset, length, shape (0: plain), start in the run
    private static final int START = 5;
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
        pieces[at + START] = bytes;
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
     * Copies group {@code group} of {@code groups} between the tensors and the pool, in the direction given, from the piece its
     * first byte falls in (found by bisection: a copy is cut into many more groups than it has threads, so each may be taken by
     * whichever thread is free).
     */
    void copyGroup(int group, int groups, IntFunction<MemorySegment> tensors, MemorySegment pool, boolean toPool, PieceCopy copier) {
        PieceCopy.Batch batch = copier.batch(pool);
        Move move = toPool ? (tensor, tensorOffset, objectOffset, length) -> batch.copy(tensor, tensorOffset, pool, objectOffset, length)
                : (tensor, tensorOffset, objectOffset, length) -> batch.copy(pool, objectOffset, tensor, tensorOffset, length);
        long from = groupStart(group, groups);
        long to = groupStart(group + 1, groups);
        for (int i = pieceAt(from); i < count; i++) {
            int at = i * FIELDS;
            long start = pieces[at + START];
            if (start >= to) {
                break;
            }
            long length = pieces[at + 3];
            long end = start + length;
            long shape = pieces[at + 4];
            if (shape != 0) {
                if (start >= from) {
                    transpose(move, tensors.apply((int) pieces[at]), pieces[at + 1], pieces[at + 2], length, shape);
                }
            } else if (end > from) {
                long skip = Math.max(0, from - start);
                long take = Math.min(end, to) - start - skip;
                move.move(tensors.apply((int) pieces[at]), pieces[at + 1] + skip, pieces[at + 2] + skip, take);
            }
        }
        batch.flush();
    }

    /** One piece's bytes between a tensor and the pool, in the copy's direction. */
    @FunctionalInterface
    private interface Move {
        void move(MemorySegment tensor, long tensorOffset, long objectOffset, long length);
    }

    /**
     * The index of the piece holding byte {@code offset} of the concatenated pieces (the last piece starting at or before it);
     * 0 when none does. A head-major piece that holds it but starts before is skipped by its group (its first byte decides).
     */
    private int pieceAt(long offset) {
        int low = 0;
        int high = count - 1;
        while (low < high) {
            int mid = (low + high + 1) >>> 1;
            if (pieces[mid * FIELDS + START] <= offset) {
                low = mid;
            } else {
                high = mid - 1;
            }
        }
        return low;
    }

    /** A head-major piece, row by row into (or out of) the object's token-major order, as the GPU kernel maps it. */
    private static void transpose(Move move, MemorySegment tensor, long tensorOffset, long objectOffset, long length, long shape) {
        long rowBytes = HeadTranspose.rowBytes(shape);
        long rows = length / rowBytes;
        for (long row = 0; row < rows; row++) {
            move.move(tensor, tensorOffset + HeadTranspose.tensorRowOffset(shape, row), objectOffset + row * rowBytes, rowBytes);
        }
    }
}
