package io.lmcache.server.cuda;

/**
 * Cuts a transfer's pieces into staging batches while they are still being planned, so the first
 * batch is on the GPU before the last chunk's pieces exist. Measured on the H200 with one request in
 * flight, building the pieces first took 17–60 µs at 1–4 chunks and up to ~190 µs at 16 (a chunk is
 * 1 024 pieces of Llama-8B KV), all of it before the first byte moved; streamed, only the first
 * batch's pieces (64 at the first 2 MiB) come before it. A piece larger than a staging half goes to
 * its {@link Target} at once; the others collect until they fill the current batch budget (2 MiB for
 * a transfer that finds its lane idle, then {@code growth} times as much per batch up to a half) or
 * a descriptor slot, and go as one batch. Pure bookkeeping over {@link Pieces}, reused per lane, so
 * it is tested without a GPU.
 */
public final class PieceStream {
    /** Where the batches go: the copy engine's lane enqueues them on the GPU. */
    interface Target {
        /** Piece {@code piece} of {@code pieces} is larger than a staging half: one DMA of its own. */
        void direct(Pieces pieces, int piece);

        /**
         * Enqueues one batch of the pieces from {@code from} on (skipping direct ones), of at most {@code budgetBytes} of
         * staging (but at least one piece), and returns the index of the first piece it did not take.
         */
        int batch(Pieces pieces, int from, long budgetBytes);

        /** Records {@code event} after every copy enqueued so far (a layer batch's end, RETRIEVE_LAYERWISE). */
        void record(LayerEvents events, int index);
    }

    private final Pieces pieces = new Pieces();
    private final long halfBytes;
    private final int maxPiecesPerBatch;
    private final long growth;
    private Target target;
    private long budgetBytes;
    private int next;
    private long pendingBytes;
    private int pendingPieces;

    /**
     * @param halfBytes a staging half: larger pieces are direct, no batch is larger
     * @param maxPiecesPerBatch a descriptor slot's capacity
     * @param growth each batch after the first is this many times the one before (up to a half). 4× halved the launches
     *     of a one-chunk request (2, 8, 22 MiB instead of 2, 4, 8, 16, 2) and its enqueue time (~25 µs), but a RETRIEVE
     *     then ends on a 22 MiB scatter that no DMA overlaps: one-chunk RETRIEVEs took ~50 µs longer on the H200
     *     (bench/RESULTS.md#gpu-one-request-in-flight), so doubling is the default ({@code -Dlmcache.cuda.batchGrowth} for experiments)
     */
    PieceStream(long halfBytes, int maxPiecesPerBatch, long growth) {
        this.halfBytes = halfBytes;
        this.maxPiecesPerBatch = maxPiecesPerBatch;
        this.growth = growth;
    }

    /** Starts a transfer whose first batch may take {@code firstBatchBytes}. */
    void begin(long firstBatchBytes, Target target) {
        this.target = target;
        pieces.clear();
        budgetBytes = Math.min(firstBatchBytes, halfBytes);
        next = 0;
        pendingBytes = 0;
        pendingPieces = 0;
    }

    /** The next piece of the transfer: a range of registered tensor {@code tensor} and its place in the pool. */
    public void add(int tensor, long tensorOffset, long poolOffset, long length) {
        pieces.add(tensor, tensorOffset, poolOffset, length);
        if (StagedBatch.direct(length, halfBytes)) {
            target.direct(pieces, pieces.count() - 1);
            return;
        }
        pendingBytes += length;
        pendingPieces++;
        while (pendingBytes >= budgetBytes || pendingPieces >= maxPiecesPerBatch) {
            cut();
        }
    }

    /**
     * A head-major piece the object holds token-major ({@link HeadTranspose}): always staged, since only the kernel transposes
     * (a DMA copies bytes in order). A run of blocks larger than a staging half is cut into runs of whole blocks that fit.
     */
    public void add(int tensor, long tensorOffset, long poolOffset, long length, long shape) {
        if (shape == 0) {
            add(tensor, tensorOffset, poolOffset, length);
            return;
        }
        long blockBytes = HeadTranspose.blockBytes(shape);
        if (StagedBatch.direct(Math.min(length, blockBytes), halfBytes)) {
            throw new CudaException("a head-major block of " + blockBytes + " B is larger than a staging half (" + halfBytes
                    + " B): raise -Dlmcache.cuda.stagingMiB");
        }
        long step = StagedBatch.direct(length, halfBytes) ? halfBytes / blockBytes * blockBytes : length;
        for (long at = 0; at < length; at += step) {
            long part = Math.min(step, length - at);
            pieces.add(tensor, tensorOffset + at, poolOffset + at, part, shape);
            pendingBytes += part;
            pendingPieces++;
            while (pendingBytes >= budgetBytes || pendingPieces >= maxPiecesPerBatch) {
                cut();
            }
        }
    }

    /** Sends what is left as batches: the transfer's last piece has been added. */
    void finish() {
        while (pendingPieces > 0) {
            cut();
        }
        target = null;
    }

    /**
     * Ends a layer batch of a layer-wise RETRIEVE: the pieces added so far go out as batches now, and pool event {@code index}
     * is recorded after them, so the worker's wait on it covers exactly the layers emitted before this call (LMCache's
     * {@code record_event(layer_events[leader], stream)} after each batch, {@code lmcache_driven_transfer_layerwise.py@1565d9a3}).
     */
    public void endLayerBatch(LayerEvents events, int index) {
        while (pendingPieces > 0) {
            cut();
        }
        target.record(events, index);
    }

    /** Pieces added since {@link #begin}: all of the transfer's once {@link #finish} ran. */
    Pieces pieces() {
        return pieces;
    }

    private void cut() {
        next = target.batch(pieces, next, budgetBytes);
        budgetBytes = Math.min(growth * budgetBytes, halfBytes);
        // what the batch left behind: pieces that did not fit its budget once aligned (a few at most)
        pendingBytes = 0;
        pendingPieces = 0;
        for (int i = next; i < pieces.count(); i++) {
            if (!StagedBatch.direct(pieces.length(i), halfBytes)) {
                pendingBytes += pieces.length(i);
                pendingPieces++;
            }
        }
    }
}
