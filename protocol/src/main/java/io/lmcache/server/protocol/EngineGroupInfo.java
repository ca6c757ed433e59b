package io.lmcache.server.protocol;

/**
 * LMCache's {@code EngineGroupInfo}: which registered tensors belong to one engine (KV-cache) group.
 * Newer fields are decoded leniently; {@code recurrentState} marks Mamba/GDN state groups.
 */
public record EngineGroupInfo(int engineGroupId, int[] layerIndices, int tokensPerBlock, boolean recurrentState) {}
