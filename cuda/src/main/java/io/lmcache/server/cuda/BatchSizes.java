package io.lmcache.server.cuda;

/**
 * The staging budget of each batch of one transfer. A transfer that finds its lane idle starts small, so its first bytes
 * cross the link after a short gather, and grows by {@code growth} per batch up to a staging half, so long transfers
 * take few launches. A RETRIEVE ends on a scatter that no DMA overlaps, so with {@code taper} its last batches shrink
 * again (each at most 4/5 of what is left, until twice the first batch is left): the scatter of each batch then fits
 * under the next one's DMA (the kernel moves device memory several times faster than the link) and the exposed drain
 * is one small scatter. Pure arithmetic, so it is tested without a GPU.
 */
final class BatchSizes {
    /**
     * Each batch after the first is this many times the one before (up to a half). 4× halved the launches of a one-chunk
     * request (2, 8, 22 MiB instead of 2, 4, 8, 16, 2) and its enqueue time (~25 µs), but a RETRIEVE then ends on a 22 MiB
     * scatter that no DMA overlaps: one-chunk RETRIEVEs took ~50 µs longer on the H200 (bench/RESULTS.md, "Second pass"),
     * so doubling stays the default; {@code -Dlmcache.cuda.batchGrowth} for experiments.
     */
    static final long GROWTH = Math.max(2, Long.getLong("lmcache.cuda.batchGrowth", 2));
    /**
     * {@code -Dlmcache.cuda.taperRetrieve=true}: a RETRIEVE that finds its lane idle shrinks its last batches
     * (see the class comment) so its final scatter is short. Off until measured on the H200 (a one-chunk RETRIEVE ends on a
     * 16 MiB scatter that only the last 2 MiB DMA overlaps).
     */
    static final boolean TAPER_RETRIEVE = Boolean.getBoolean("lmcache.cuda.taperRetrieve");
    private final long firstBytes;
    private final long halfBytes;
    private final long growth;
    private final boolean taper;
    private long grownBytes;
    private long remainingBytes;

    /** @param stagedBytes the bytes of the transfer's pieces that go through staging (not the direct ones) */
    BatchSizes(long firstBytes, long halfBytes, long growth, boolean taper, long stagedBytes) {
        this.firstBytes = Math.min(firstBytes, halfBytes);
        this.halfBytes = halfBytes;
        this.growth = growth;
        this.taper = taper;
        this.grownBytes = this.firstBytes;
        this.remainingBytes = stagedBytes;
    }

    /** The batch sizes of one transfer: only the pieces that go through staging count; a taper only for an idle-lane RETRIEVE. */
    static BatchSizes forTransfer(Direction direction, Pieces pieces, long firstBatchBytes, long halfBytes) {
        long staged = 0;
        for (int i = 0; i < pieces.count(); i++) {
            staged += StagedBatch.direct(pieces.length(i), halfBytes) ? 0 : pieces.length(i);
        }
        boolean taper = TAPER_RETRIEVE && direction == Direction.FROM_POOL && firstBatchBytes < halfBytes;
        return new BatchSizes(firstBatchBytes, halfBytes, GROWTH, taper, staged);
    }

    /** The next batch's budget (a batch takes at least one piece, whatever its budget). */
    long next() {
        long budget = grownBytes;
        grownBytes = Math.min(growth * grownBytes, halfBytes);
        if (taper && remainingBytes > 2 * firstBytes) {
            budget = Math.min(budget, Math.max(firstBytes, remainingBytes / 5 * 4));
        }
        return budget;
    }

    /** The batch just filled took these bytes of staging. */
    void staged(long bytes) {
        remainingBytes -= bytes;
    }
}
