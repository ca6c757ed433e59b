package io.lmcache.server.protocol;

/**
 * The payload of REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT (protocol doc §7.3): the geometry of the
 * worker's chunk objects, which the worker itself gathers into and scatters out of the pool.
 *
 * @param useMla true = one plane per layer (MLA or fused K/V), else K and V planes
 * @param numPhysicalSlots tokens per object; 0 when the client sent nil (= the chunk size)
 * @param kvGroups KV-cache groups the payload lists ({@code engine_group_infos}, or the older
 *     {@code group_layouts}); 0 when it lists none (one group)
 */
public record EngineDrivenRegistration(
        long instanceId,
        String modelName,
        int worldSize,
        int blockSize,
        int numLayers,
        int hiddenDimSize,
        String dtypeStr,
        boolean useMla,
        int numPhysicalSlots,
        int kvGroups) {}
