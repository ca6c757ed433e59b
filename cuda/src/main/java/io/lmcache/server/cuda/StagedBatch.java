package io.lmcache.server.cuda;

import java.util.Arrays;

/**
 * One batch of a transfer's pieces, packed into a device staging buffer: the kernel moves each
 * piece between the worker's block and its place in the buffer (device memory on both sides, so a
 * few SMs are plenty), and the copy engines move the buffer to or from the pool in long DMA runs.
 * Only a piece larger than the buffer goes straight to DMA. Measured on the H200, the gather/scatter
 * kernel reading or writing host memory itself reaches the line rate in one direction but collapses
 * to about 58 GB/s when a STORE and a RETRIEVE run at once; DMA in both directions reaches about
 * 100 GB/s. With {@code -Dlmcache.cuda.stageInPoolOrder} the pieces sit in the buffer in pool order, so each run is as
 * long as the pool allows. Pure arithmetic over the pieces, reused per lane, so it is tested without a GPU.
 */
public final class StagedBatch {
    /** Piece offsets in the staging buffer are 16-byte aligned, which the kernel's wide path needs. */
    static final long ALIGN = 16;
    /** Bits of a {@link #byPool} key that hold the piece's position in the batch (a descriptor slot holds at most 4 096). */
    private static final int INDEX_BITS = 13;
    /** Pool offsets below this fit a {@link #byPool} key beside the position (8 PiB). */
    private static final long MAX_SORTED_POOL_OFFSET = 1L << (63 - INDEX_BITS);

    private final long[] descriptors;
    private final long[] shapes;
    private final long[] runs;
    /** The batch's pieces (their indexes in {@link Pieces}), in the order they came. */
    private final int[] taken;
    /** Where each taken piece sits in the staging buffer. */
    private final long[] stagingAt;
    /** {@code poolOffset << INDEX_BITS | position}: the taken pieces in pool order, where the staging buffer holds them. */
    private final long[] byPool;
    private final int maxPieces;
    /** Whether the pieces are laid out in pool order ({@code -Dlmcache.cuda.stageInPoolOrder}); else in the order they came. */
    private final boolean poolOrder;
    private int pieceCount;
    private int runCount;
    private long stagedBytes;
    private boolean transposes;

    /**
     * @param maxPieces the most descriptors one launch takes (a descriptor slot's size)
     * @param poolOrder lay the pieces out in pool order (longer DMA runs for hybrid models); else in the order they came
     */
    public StagedBatch(int maxPieces, boolean poolOrder) {
        if (maxPieces < 1 || maxPieces > 1 << INDEX_BITS) {
            throw new IllegalArgumentException("a batch holds 1.." + (1 << INDEX_BITS) + " pieces, not " + maxPieces);
        }
        this.maxPieces = maxPieces;
        this.poolOrder = poolOrder;
        this.descriptors = new long[3 * maxPieces];
        this.shapes = new long[maxPieces];
        this.runs = new long[3 * maxPieces];
        this.taken = new int[maxPieces];
        this.stagingAt = new long[maxPieces];
        this.byPool = new long[maxPieces];
    }

    /** A staging buffer in device memory: where a batch is packed, and how much it holds. */
    public record Buffer(long address, long bytes) {}

    /** Whether a piece is too large for a staging buffer and so is one DMA call of its own. */
    public static boolean direct(long length, long stagingBytes) {
        return length > stagingBytes;
    }

    /** The whole buffer as the batch's budget (see the full form). */
    public int fill(Pieces pieces, int from, long[] tensorBases, Direction direction, Buffer staging, long regionBytes) {
        return fill(pieces, from, tensorBases, direction, staging, staging.bytes(), regionBytes);
    }

    /**
     * Takes pieces from {@code from} on, skipping those that go straight to DMA, until {@code batchBytes}
     * (at most the buffer's size) or the descriptor slot is full, and returns the index of the first piece
     * not looked at. A batch always takes its first piece, however long (pieces longer than the buffer are
     * direct), so a small budget never stalls. The copy engine grows the budget batch by batch: a small
     * first batch starts the link early, larger ones keep the kernel launches few. Descriptors are
     * {@code {src, dst, bytes}} with absolute addresses (the direction decides which side is the staging buffer), in the
     * order the pieces came; with {@code poolOrder} the pieces sit in the buffer in pool order, so pool-adjacent pieces make
     * one run. Runs are {@code {poolOffset, stagingOffset, bytes}}, each contiguous on both sides and inside one pool region
     * (regions are registered one by one).
     */
    public int fill(Pieces pieces, int from, long[] tensorBases, Direction direction, Buffer staging, long batchBytes,
            long regionBytes) {
        int next = take(pieces, from, staging.bytes(), Math.min(batchBytes, staging.bytes()));
        place(pieces, staging.bytes(), regionBytes);
        long stagingAddress = staging.address();
        transposes = false;
        for (int k = 0; k < pieceCount; k++) {
            int i = taken[k];
            long device = tensorBases[pieces.tensor(i)] + pieces.tensorOffset(i);
            long at = stagingAddress + stagingAt[k];
            int d = 3 * k;
            descriptors[d] = direction == Direction.TO_POOL ? device : at;
            descriptors[d + 1] = direction == Direction.TO_POOL ? at : device;
            descriptors[d + 2] = pieces.length(i);
            shapes[k] = pieces.shape(i);
            transposes |= pieces.shape(i) != 0;
        }
        return next;
    }

    /**
     * Picks the batch's pieces in the order they came (the descriptors keep that order, which spreads each size of piece over
     * the kernel's blocks) and returns the index of the first piece not looked at; the first piece always fits the buffer.
     */
    private int take(Pieces pieces, int from, long stagingBytes, long limit) {
        pieceCount = 0;
        long end = 0;
        int i = from;
        for (; i < pieces.count() && pieceCount < maxPieces; i++) {
            long length = pieces.length(i);
            if (direct(length, stagingBytes)) {
                continue;
            }
            if (pieceCount > 0 && end + length > limit) {
                break; // never on an empty batch: a piece that fits no buffer is direct
            }
            taken[pieceCount++] = i;
            end += aligned(length);
        }
        return i;
    }

    /**
     * Lays the taken pieces out in the staging buffer: in the order they came, or with {@link #poolOrder} in pool order, so
     * that pieces adjacent in the pool are adjacent in staging and go as one DMA run. A hybrid model's chunk is one object per
     * group, and its pieces come chunk by chunk (Mamba state, then attention, then the next chunk's), while each group's
     * objects lie next to each other in the pool (one size class per region): in the order they came, every object is a run of
     * its own. Where the pieces already come in pool order (a plain model's), nothing moves. Off by default until a GPU test
     * run with it on passes (bench/RESULTS.md#gpu-hybrid-models).
     */
    private void place(Pieces pieces, long stagingBytes, long regionBytes) {
        boolean sort = poolOrder && sortsInto(pieces, stagingBytes);
        runCount = 0;
        long at = 0;
        for (int j = 0; j < pieceCount; j++) {
            int k = sort ? (int) (byPool[j] & ((1L << INDEX_BITS) - 1)) : j;
            int i = taken[k];
            at = aligned(at);
            stagingAt[k] = at;
            addRun(pieces.poolOffset(i), at, pieces.length(i), regionBytes);
            at += pieces.length(i);
        }
        stagedBytes = at;
    }

    /**
     * Sorts {@link #byPool} when the taken pieces are out of pool order and, reordered, still fit the buffer (the last piece
     * may then be one whose length is not a multiple of {@link #ALIGN}: the aligned sum bounds the end); false when they stay
     * as they came.
     */
    private boolean sortsInto(Pieces pieces, long stagingBytes) {
        boolean inPoolOrder = true;
        boolean keyed = true;
        long alignedBytes = 0;
        for (int k = 0; k < pieceCount; k++) {
            long pool = pieces.poolOffset(taken[k]);
            inPoolOrder &= k == 0 || pool >= pieces.poolOffset(taken[k - 1]);
            keyed &= pool < MAX_SORTED_POOL_OFFSET; // beyond it no real pool reaches: the order stays as it came
            alignedBytes += aligned(pieces.length(taken[k]));
            byPool[k] = pool << INDEX_BITS | k;
        }
        if (inPoolOrder || !keyed || alignedBytes > stagingBytes) {
            return false;
        }
        Arrays.sort(byPool, 0, pieceCount);
        return true;
    }

    private static long aligned(long bytes) {
        return (bytes + ALIGN - 1) & -ALIGN;
    }

    private void addRun(long poolOffset, long stagingOffset, long length, long regionBytes) {
        if (runCount > 0) {
            int r = 3 * (runCount - 1);
            long poolEnd = runs[r] + runs[r + 2];
            long stagingEnd = runs[r + 1] + runs[r + 2];
            boolean sameRegion = runs[r] / regionBytes == (poolOffset + length - 1) / regionBytes;
            if (poolEnd == poolOffset && stagingEnd == stagingOffset && sameRegion) {
                runs[r + 2] += length;
                return;
            }
        }
        int r = 3 * runCount++;
        runs[r] = poolOffset;
        runs[r + 1] = stagingOffset;
        runs[r + 2] = length;
    }

    public int pieceCount() {
        return pieceCount;
    }

    public int runCount() {
        return runCount;
    }

    /** Bytes of the staging buffer the batch uses, alignment included. */
    public long stagedBytes() {
        return stagedBytes;
    }

    /**
     * Whether some piece of the batch is head-major ({@link HeadTranspose}): the batch then needs the transposing kernel,
     * which reads each piece's shape after the triples; otherwise the plain kernel copies it as before.
     */
    public boolean transposes() {
        return transposes;
    }

    /** Each piece's {@link HeadTranspose} shape (0: plain), {@link #pieceCount} of them. */
    public long[] shapes() {
        return shapes;
    }

    /** The descriptor triples, {@link #pieceCount} of them. */
    public long[] descriptors() {
        return descriptors;
    }

    public long runPoolOffset(int run) {
        return runs[3 * run];
    }

    public long runStagingOffset(int run) {
        return runs[3 * run + 1];
    }

    public long runBytes(int run) {
        return runs[3 * run + 2];
    }
}
