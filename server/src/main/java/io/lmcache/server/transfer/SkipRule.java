package io.lmcache.server.transfer;

/**
 * RETRIEVE's {@code skip_first_n_tokens} for a group that keeps only the last blocks of each chunk
 * (hybrid-and-l2.md §A.3.4, LMCache's {@code _recalculate_blocks_to_skip}): the skip counted in a
 * chunk's blocks becomes a skip within its kept window.
 */
public final class SkipRule {
    private SkipRule() {}

    /**
     * Kept blocks to skip when the first {@code skippedBlocks} blocks (from a batch's start) are
     * skipped, with {@code perChunk} blocks per chunk of which the last {@code kept} are kept.
     */
    public static int keptBlocksToSkip(int skippedBlocks, int perChunk, int kept) {
        if (perChunk == kept) {
            return skippedBlocks;
        }
        return (skippedBlocks / perChunk) * kept + Math.max(0, skippedBlocks % perChunk - (perChunk - kept));
    }

    /**
     * Slot rows at the start of one chunk's kept blocks that must not be written, when the chunk's first {@code skipInChunk}
     * tokens are skipped. A recurrent group skips whole blocks only: a state snapshot is written whole or not at all;
     * attention rows before the skip are left alone. A compressed group (several tokens per slot, DeepSeek-V4) converts the
     * tokens to slots rounding down, so a slot that holds any token past the skip is written (LMCache's
     * {@code calculate_num_blocks} rounds a skip down too, kv_layer_groups.py).
     */
    public static int keptTokensToSkip(KernelGroup kernel, int skipInChunk) {
        int tokensPerBlock = kernel.tokensPerBlock();
        int slots = kernel.layout().blockSize();
        if (kernel.recurrent()) {
            return keptBlocksToSkip(skipInChunk / tokensPerBlock, kernel.blocksPerChunk(), kernel.blocksKept()) * slots;
        }
        long tokens = Math.max(0, skipInChunk - (long) kernel.firstKept() * tokensPerBlock);
        return (int) (tokens * slots / tokensPerBlock);
    }
}
