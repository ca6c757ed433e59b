package io.lmcache.server.transfer;

import java.util.function.IntPredicate;

/**
 * Plans the copies of one chunk between a worker's paged KV tensors and a pool object: for every
 * plane and layer, the chunk's blocks in token order, with runs of consecutive, adjacent blocks
 * merged into one range (FlashAttention and MLA keep a layer's blocks back to back), and the
 * tokens before {@code skipTokens} left out (whole blocks, then whole rows of a partly skipped
 * block). The same plan serves both directions; only the executor decides which way bytes flow.
 *
 * <p>A layout that {@link KvLayout#transposes} emits its pieces as {@link PieceSink#transposed} ones, a block or a run of
 * adjacent blocks each with its shape, so their descriptors are as few as for token-major layouts: the object holds
 * each block token-major, and a partly skipped block is one piece of its last rows (contiguous in the object).
 */
public final class PiecePlanner {
    private PiecePlanner() {}

    /** One chunk's blocks: the ids {@code [firstId, firstId + count)} of a request's {@code blockIds} for one group. */
    public record ChunkBlocks(int[] blockIds, int firstId, int count) {}

    /**
     * @param blockIds the request's block ids for this group; the chunk uses {@code [firstId, firstId + B)}
     * @param skipTokens tokens at the start of the chunk that must not be copied (RETRIEVE's skip)
     * @param objectBase the object's byte offset in the pool
     */
    public static void chunk(KvLayout layout, int[] blockIds, int firstId, int blocksPerChunk, int skipTokens, long objectBase,
            PieceSink sink) {
        chunk(layout, null, new ChunkBlocks(blockIds, firstId, blocksPerChunk), skipTokens, objectBase, sink);
    }

    /**
     * As above, for a kernel group whose tensors are some of the registered ones.
     *
     * @param tensorIds the registered tensor (wrapper index) of each of the layout's tensors; null = the same index
     */
    public static void chunk(KvLayout layout, int[] tensorIds, ChunkBlocks blocks, int skipTokens, long objectBase, PieceSink sink) {
        chunk(layout, tensorIds, blocks, skipTokens, objectBase, null, sink);
    }

    /** As above, only for the layers {@code layers} accepts (a layer-wise RETRIEVE's batch); null = every layer. */
    public static void chunk(KvLayout layout, int[] tensorIds, ChunkBlocks blocks, int skipTokens, long objectBase, IntPredicate layers,
            PieceSink sink) {
        int[] blockIds = blocks.blockIds();
        int firstId = blocks.firstId();
        int blocksPerChunk = blocks.count();
        int blockSize = layout.blockSize();
        int skippedBlocks = Math.min(blocksPerChunk, skipTokens / blockSize);
        int partialRows = skippedBlocks < blocksPerChunk ? skipTokens % blockSize : 0;
        boolean adjacent = adjacent(layout);
        boolean transposes = layout.transposes();
        long wholeBlocks = transposes ? layout.transposeShape(0) : 0;
        long piece = layout.pieceBytes();
        for (int plane = 0; plane < layout.planes(); plane++) {
            for (int layer = 0; layer < layout.numLayers(); layer++) {
                if (layers != null && !layers.test(layer)) {
                    continue;
                }
                int tensor = tensorIds == null ? layout.tensorIndex(layer, plane) : tensorIds[layout.tensorIndex(layer, plane)];
                long objectRow = objectBase + ((long) plane * layout.numLayers() + layer) * blocksPerChunk * piece;
                int k = skippedBlocks;
                if (partialRows > 0) {
                    long tensorOffset = layout.pieceOffset(layer, plane, blockIds[firstId + k]);
                    if (transposes) {
                        partialTransposed(layout, tensor, tensorOffset, objectRow + k * piece, partialRows, sink);
                    } else {
                        partialBlock(layout, tensor, tensorOffset, objectRow + k * piece, partialRows, sink);
                    }
                    k++;
                }
                while (k < blocksPerChunk) {
                    int runStart = k;
                    int block = blockIds[firstId + k];
                    k = runEnd(blockIds, firstId, k, blocksPerChunk, adjacent);
                    long tensorOffset = layout.pieceOffset(layer, plane, block);
                    if (transposes) {
                        sink.transposed(tensor, tensorOffset, objectRow + runStart * piece, (k - runStart) * piece, wholeBlocks);
                    } else {
                        sink.piece(tensor, tensorOffset, objectRow + runStart * piece, (k - runStart) * piece);
                    }
                }
            }
        }
    }

    /**
     * The length of the first piece {@link #chunk} emits for the first chunk of {@code kernel} (no skip): a run of
     * consecutive, adjacent blocks is one piece. Read before the request is validated, so ids it cannot see (a list too
     * short) count as a run's end. The CUDA path starts a transfer differently for long first pieces (see
     * {@code CopyEngine.warm}).
     */
    public static long firstPieceBytes(KernelGroup kernel, int[] blockIds) {
        KvLayout layout = kernel.layout();
        if (layout.transposes()) {
            return 0; // only the kernel transposes: the transfer starts with it, never with the DMA head
        }
        int first = kernel.firstKept();
        if (blockIds == null || first >= blockIds.length) {
            return layout.pieceBytes();
        }
        return runEnd(blockIds, first, 0, kernel.blocksKept(), adjacent(layout)) * layout.pieceBytes();
    }

    /** Whether a layer's blocks lie back to back in the layout (FlashAttention, MLA), so consecutive ids make one piece. */
    private static boolean adjacent(KvLayout layout) {
        return layout.blockStrideBytes() == layout.pieceBytes();
    }

    /**
     * Where the run of consecutive block ids that starts at {@code k} ends (exclusive, at most {@code end}): the next block
     * alone unless the layout keeps blocks {@code adjacent}. Ids past the list's end end the run (a list read before it
     * was validated).
     */
    private static int runEnd(int[] blockIds, int firstId, int k, int end, boolean adjacent) {
        int block = blockIds[firstId + k];
        int next = k + 1;
        while (adjacent && next < end && firstId + next < blockIds.length && blockIds[firstId + next] == block + (next - k)) {
            next++;
        }
        return next;
    }

    /**
     * Rows {@code [fromRow, blockSize)} of a block the object holds token-major: in the object, one range from the row's
     * first head on; the tensor offset stays the block's start (the shape says which rows are left out).
     */
    private static void partialTransposed(KvLayout layout, int tensor, long tensorOffset, long objectOffset, int fromRow,
            PieceSink sink) {
        long tokenBytes = layout.subBlocks() * layout.rowBytes();
        sink.transposed(tensor, tensorOffset, objectOffset + fromRow * tokenBytes, (layout.blockSize() - fromRow) * tokenBytes,
                layout.transposeShape(fromRow));
    }

    /** Rows {@code [fromRow, blockSize)} of every sub-block (head, for HND) of one piece. */
    private static void partialBlock(KvLayout layout, int tensor, long tensorOffset, long objectOffset, int fromRow, PieceSink sink) {
        long subBlockBytes = layout.blockSize() * layout.rowBytes();
        long skip = fromRow * layout.rowBytes();
        long length = subBlockBytes - skip;
        for (int sub = 0; sub < layout.subBlocks(); sub++) {
            long within = sub * subBlockBytes + skip;
            sink.piece(tensor, tensorOffset + within, objectOffset + within, length);
        }
    }
}
