package io.lmcache.server.protocol;

/**
 * LMCache's {@code EngineGroupInfo} (a msgspec Struct, sent as a map keyed by field name): the
 * registered tensors of one kernel group of a hybrid model (hybrid-and-l2.md §A.2.2). Decoded
 * leniently: the six core fields, unknown keys ignored, absent ones defaulted.
 *
 * @param engineGroupId vLLM's KV-cache group whose block ids this group uses
 * @param layerIndices indices into the registered wrapper list
 * @param tokensPerBlock tokens one block id covers; 0 = not reported (the tensor's block size)
 * @param swSizeTokens sliding window in tokens; {@link #FULL_ATTENTION} for full attention
 * @param extraObjectGroupTag 0 for a normal group; above 0 a connector-private (CacheBlend aux) group
 * @param recurrentState the pages hold Mamba/GDN state snapshots, not attention KV
 */
public record EngineGroupInfo(int engineGroupId, int[] layerIndices, int tokensPerBlock, int swSizeTokens, int extraObjectGroupTag,
        boolean recurrentState) {
    public static final int FULL_ATTENTION = -1;

    /** A full-attention group with the defaults of the fields an older client leaves out. */
    public static EngineGroupInfo of(int engineGroupId, int[] layerIndices) {
        return new EngineGroupInfo(engineGroupId, layerIndices, 0, FULL_ATTENTION, 0, false);
    }
}
