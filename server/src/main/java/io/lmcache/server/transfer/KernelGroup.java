package io.lmcache.server.transfer;

import io.lmcache.server.protocol.EngineGroupInfo;

/**
 * One kernel group (LMCache's {@code EngineGroupInfo}, hybrid-and-l2.md §A.1): layers of one engine
 * group that share one physical layout, and how much of each chunk it moves. A chunk spans
 * {@code blocksPerChunk} of its block ids; only the last {@code blocksKept} of them are copied (all
 * of them, except for a recurrent group, whose window is its last state snapshot).
 *
 * @param index position in the registration's {@code engine_group_infos} (the protocol order of STORE's block lists)
 * @param tensorIds the registered tensor (wrapper index) of each of the layout's tensors
 * @param windowTokens the group's sliding window, {@link EngineGroupInfo#FULL_ATTENTION} for none
 */
public record KernelGroup(int index, int engineGroupId, int[] tensorIds, KvLayout layout, int tokensPerBlock, int windowTokens,
        int extraTag, boolean recurrent, int blocksPerChunk, int blocksKept) {

    public GroupKind kind() {
        return extraTag > 0 ? GroupKind.AUX : recurrent ? GroupKind.RECURRENT : GroupKind.ATTENTION;
    }

    /** Whether a slot packs several tokens (DeepSeek-V4's compressed MLA and indexer caches: tokens_per_block > slots_per_block). */
    public boolean compressed() {
        return tokensPerBlock != layout.blockSize();
    }

    /** The first kept block of a chunk, counted from the chunk's first block. */
    public int firstKept() {
        return blocksPerChunk - blocksKept;
    }

    /** Bytes of this group's segment in a chunk object: the kept blocks of every layer and plane. */
    public long segmentBytes() {
        return layout.segmentBytes(blocksKept);
    }

    /**
     * The window in chunks that a LOOKUP needs present ({@code ceil(sw / chunk)}), -1 for full
     * attention; a recurrent group needs only the last chunk's snapshot.
     */
    public int windowChunks(int chunkSize) {
        if (recurrent) {
            return 1;
        }
        return windowTokens < 0 ? -1 : (windowTokens + chunkSize - 1) / chunkSize;
    }
}
