package io.lmcache.server.transfer;

import io.lmcache.server.protocol.EngineGroupInfo;

/**
 * The fields LMCache appended to {@code EngineGroupInfo} for DeepSeek V4.1 ({@code lmcache/v1/multiprocess/group_view.py},
 * "phase-1 freeze contract"), and two branch variants, checked against the group's tensors (hybrid-and-l2.md §A.2.2). The
 * server copies whole blocks as opaque bytes, so these fields change nothing it does where they agree with the tensors; where
 * they describe a page the tensors do not show, or an addressing the sources do not pin down, the registration is refused
 * with one line, never served wrong.
 */
final class GroupTail {
    private GroupTail() {}

    static void check(String name, EngineGroupInfo.Tail tail, KvLayout layout, int chunkSize) throws LayoutException {
        checkAddressing(name, tail, chunkSize);
        checkPage(name, tail, layout);
    }

    /** Fields that change which blocks or tokens a transfer means. */
    private static void checkAddressing(String name, EngineGroupInfo.Tail tail, int chunkSize) throws LayoutException {
        if (!EngineGroupInfo.Tail.SPARSE.equals(tail.cacheRole()) && !EngineGroupInfo.Tail.INDEXER.equals(tail.cacheRole())) {
            throw new LayoutException(name + ": cache_role must be \"sparse\" or \"indexer\" (vLLM's SparseCacheRole), not a "
                    + tail.cacheRole().length() + "-byte other value");
        }
        // LMCache's align_group_servable_length: a group serves only prefixes that are a multiple of tokens_per_state; every
        // hit here is whole chunks, so a chunk that is such a multiple keeps each hit servable
        if (tail.tokensPerState() < 0 || (tail.tokensPerState() > 1 && chunkSize % tail.tokensPerState() != 0)) {
            throw new LayoutException(name + ": tokens_per_state " + tail.tokensPerState() + " does not divide the chunk size "
                    + chunkSize);
        }
        if (tail.physicalBlocksPerEngineBlock() != 1) {
            throw new LayoutException(name + ": physical_blocks_per_engine_block " + tail.physicalBlocksPerEngineBlock()
                    + " (a branch's expansion of engine block ids) is not served; only 1");
        }
        if (tail.nullBlockId() != 0) {
            throw new LayoutException(name + ": null_block_id " + tail.nullBlockId() + " (a branch's per-group null block) is not"
                    + " served; only vLLM's null block 0");
        }
    }

    /** Fields that describe the page: served when they agree with the tensors' shape and strides. */
    private static void checkPage(String name, EngineGroupInfo.Tail tail, KvLayout layout) throws LayoutException {
        long heads = tail.numHeadSlots() == EngineGroupInfo.NOT_SET ? layout.numHeads() : tail.numHeadSlots();
        if (heads != layout.numHeads()) {
            throw new LayoutException(name + ": num_head_slots " + tail.numHeadSlots() + " differs from the " + layout.numHeads()
                    + " head(s) of its tensors: a page packed other than one slot per KV head is not served");
        }
        long tokenBytes = layout.pieceBytes() / layout.blockSize();
        if (tail.stateContentBytes() != EngineGroupInfo.NOT_SET && tail.stateContentBytes() * heads != tokenBytes) {
            throw new LayoutException(name + ": state_content_bytes " + tail.stateContentBytes() + " x " + heads + " head slot(s) is"
                    + " not the " + tokenBytes + "-byte slot row of its tensors: a packed record that is not the tensor's rows is"
                    + " not served");
        }
        long pageBytes = layout.planes() * layout.pieceBytes();
        if (tail.pageSizePadded() != EngineGroupInfo.NOT_SET && (tail.pageSizePadded() < pageBytes
                || (layout.planes() == 1 && tail.pageSizePadded() > layout.blockStrideBytes()))) {
            throw new LayoutException(name + ": page_size_padded " + tail.pageSizePadded() + " does not fit its tensors' " + pageBytes
                    + "-byte page and " + layout.blockStrideBytes() + "-byte block stride");
        }
        long alignment = tail.blockStrideAlignment();
        if (alignment != EngineGroupInfo.NOT_SET && (alignment <= 0 || layout.blockStrideBytes() % alignment != 0)) {
            throw new LayoutException(name + ": block_stride_alignment " + alignment + " does not divide its tensors' "
                    + layout.blockStrideBytes() + "-byte block stride");
        }
    }
}
