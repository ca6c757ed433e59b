package io.lmcache.server.cuda;

/**
 * One batch of a transfer's pieces, packed into a device staging buffer: the kernel moves each
 * piece between the worker's block and its place in the buffer (device memory on both sides, so a
 * few SMs are plenty), and the copy engines move the buffer to or from the pool in long DMA runs.
 * Only a piece larger than the buffer goes straight to DMA. Measured on the H200, the gather/scatter
 * kernel reading or writing host memory itself reaches the line rate in one direction but collapses
 * to about 58 GB/s when a STORE and a RETRIEVE run at once; DMA in both directions reaches about
 * 100 GB/s. Pure arithmetic over the pieces, reused per lane, so it is tested without a GPU.
 */
public final class StagedBatch {
    /** Piece offsets in the staging buffer are 16-byte aligned, which the kernel's wide path needs. */
    static final long ALIGN = 16;

    private final long[] descriptors;
    private final long[] shapes;
    private final long[] runs;
    private final int maxPieces;
    private int pieceCount;
    private int runCount;
    private long stagedBytes;
    private boolean transposes;

    /** @param maxPieces the most descriptors one launch takes (a descriptor slot's size) */
    public StagedBatch(int maxPieces) {
        this.maxPieces = maxPieces;
        this.descriptors = new long[3 * maxPieces];
        this.shapes = new long[maxPieces];
        this.runs = new long[3 * maxPieces];
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
     * {@code {src, dst, bytes}} with absolute addresses (the direction decides which side is the staging buffer);
     * runs are {@code {poolOffset, stagingOffset, bytes}}, each contiguous on both sides and inside one pool region (regions are registered one by one).
     */
    public int fill(Pieces pieces, int from, long[] tensorBases, Direction direction, Buffer staging, long batchBytes,
            long regionBytes) {
        long stagingAddress = staging.address();
        long stagingBytes = staging.bytes();
        pieceCount = 0;
        runCount = 0;
        stagedBytes = 0;
        transposes = false;
        int i = from;
        for (; i < pieces.count() && pieceCount < maxPieces; i++) {
            long length = pieces.length(i);
            if (direct(length, stagingBytes)) {
                continue;
            }
            long at = (stagedBytes + ALIGN - 1) & -ALIGN;
            if (at + length > (pieceCount == 0 ? stagingBytes : Math.min(batchBytes, stagingBytes))) {
                break; // never on an empty batch: a piece that fits no buffer is direct
            }
            long device = tensorBases[pieces.tensor(i)] + pieces.tensorOffset(i);
            int d = 3 * pieceCount++;
            descriptors[d] = direction == Direction.TO_POOL ? device : stagingAddress + at;
            descriptors[d + 1] = direction == Direction.TO_POOL ? stagingAddress + at : device;
            descriptors[d + 2] = length;
            shapes[pieceCount - 1] = pieces.shape(i);
            transposes |= pieces.shape(i) != 0;
            addRun(pieces.poolOffset(i), at, length, regionBytes);
            stagedBytes = at + length;
        }
        return i;
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
