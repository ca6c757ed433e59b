package io.lmcache.server.protocol;

/**
 * LMCache's {@code EngineGroupInfo} (a msgspec Struct, sent as a map keyed by field name): the
 * registered tensors of one kernel group of a hybrid model (hybrid-and-l2.md §A.2.2). Decoded
 * leniently: unknown keys ignored, absent ones (and nil) defaulted.
 *
 * @param engineGroupId vLLM's KV-cache group whose block ids this group uses
 * @param layerIndices indices into the registered wrapper list
 * @param tokensPerBlock tokens one block id covers; 0 = not reported (the tensor's block size)
 * @param swSizeTokens sliding window in tokens; {@link #FULL_ATTENTION} for full attention
 * @param extraObjectGroupTag 0 for a normal group; above 0 a connector-private (CacheBlend aux) group
 * @param recurrentState the pages hold Mamba/GDN state snapshots, not attention KV
 * @param tail the fields appended after the six core ones (DeepSeek V4.1 and branch variants), defaulted when absent
 */
public record EngineGroupInfo(int engineGroupId, int[] layerIndices, int tokensPerBlock, int swSizeTokens, int extraObjectGroupTag,
        boolean recurrentState, Tail tail) {
    public static final int FULL_ATTENTION = -1;
    /** A nullable int field the client left out or sent as nil. */
    public static final long NOT_SET = -1;

    /**
     * The fields LMCache appended last, all defaulted "so msgspec IPC stays wire-compatible both ways" (LMCache
     * {@code lmcache/v1/multiprocess/group_view.py}, the "DeepSeek V4.1 metadata (phase-1 freeze contract)" block), and two
     * branch variants (hybrid-and-l2.md §A.2.2). The server serves only the values whose meaning it can pin down and refuses
     * the rest at REGISTER.
     *
     * @param tokensPerState tokens one stored state covers ({@code tokens_per_state}; 0 = sliding window, 1 = one token)
     * @param cacheRole {@code "sparse"} or {@code "indexer"} (vLLM's {@code SparseCacheRole})
     * @param stateContentBytes bytes of one (head slot, stored state) cell of a packed page; {@link #NOT_SET}: dense
     * @param blockStrideAlignment byte alignment the engine gave the distance between blocks; {@link #NOT_SET}: none
     * @param indexGroupLeader the group publishes the index blocks other groups share ({@code is_index_group_leader})
     * @param prefixCacheable whether the group's pages take part in prefix caching; false (a per-request scratch ring,
     *     vLLM's {@code CircularBufferSpec}): never stored, never required for a hit
     * @param pageSizePadded the page size in bytes when the engine pads pages; {@link #NOT_SET}: unpadded
     * @param numHeadSlots the page's logical head count when packing is not one slot per KV head; {@link #NOT_SET}: one
     * @param physicalBlocksPerEngineBlock one branch's engine-block expansion ({@code b -> b*N .. b*N+N-1}); 1 = none
     * @param nullBlockId one branch's per-group null-block sentinel; 0 = vLLM's null block
     */
    public record Tail(int tokensPerState, String cacheRole, long stateContentBytes, long blockStrideAlignment,
            boolean indexGroupLeader, boolean prefixCacheable, long pageSizePadded, long numHeadSlots,
            int physicalBlocksPerEngineBlock, int nullBlockId) {
        public static final String SPARSE = "sparse";
        public static final String INDEXER = "indexer";
        /** What a client that sends none of these fields means (group_view.py's defaults). */
        public static final Tail DEFAULTS = new Tail(1, SPARSE, NOT_SET, NOT_SET, false, true, NOT_SET, NOT_SET, 1, 0);
    }

    /** The six core fields, the rest defaulted (an older client). */
    public EngineGroupInfo(int engineGroupId, int[] layerIndices, int tokensPerBlock, int swSizeTokens, int extraObjectGroupTag,
            boolean recurrentState) {
        this(engineGroupId, layerIndices, tokensPerBlock, swSizeTokens, extraObjectGroupTag, recurrentState, Tail.DEFAULTS);
    }

    /** A full-attention group with the defaults of the fields an older client leaves out. */
    public static EngineGroupInfo of(int engineGroupId, int[] layerIndices) {
        return new EngineGroupInfo(engineGroupId, layerIndices, 0, FULL_ATTENTION, 0, false);
    }

    public boolean prefixCacheable() {
        return tail.prefixCacheable();
    }
}
