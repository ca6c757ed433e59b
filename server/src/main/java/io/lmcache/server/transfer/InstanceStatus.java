package io.lmcache.server.transfer;

import io.lmcache.server.liveness.InstanceRegistry;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.peer.PeerConnections;
import io.lmcache.server.protocol.EngineGroupInfo;
import io.lmcache.server.protocol.TensorWrapper;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;

/** LMCache's {@code registered_gpu_ids} and {@code cache_context_meta} /status entries for the LMCache-driven instances. */
public final class InstanceStatus {
    /** Kernel groups and object groups listed per instance (the counts say how many there are). */
    static final int MAX_GROUPS = 32;

    private InstanceStatus() {}

    public static void put(Map<String, Object> status, List<InstanceRegistry.Registered<InstanceContext>> instances,
            PeerConnections connections, int chunkSize) {
        List<Long> ids = new ArrayList<>();
        Map<String, Object> meta = new LinkedHashMap<>();
        for (InstanceRegistry.Registered<InstanceContext> registered : instances) {
            InstanceContext context = registered.context();
            ids.add(context.instanceId());
            Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("model_name", LogText.status(context.modelName()));
            entry.put("world_size", context.worldSize());
            entry.put("kv_cache_layout", kvLayout(context, chunkSize));
            entry.put("connection_closed", connections.closedSinceNs(registered.peer()) >= 0);
            meta.put(Long.toString(context.instanceId()), entry);
        }
        status.put("registered_gpu_ids", ids);
        status.put("cache_context_meta", meta);
    }

    /** LMCache's {@code kv_cache_layout} (hybrid-and-l2.md §A.7), with an {@code object_groups} summary of ours. */
    static Map<String, Object> kvLayout(InstanceContext context, int chunkSize) {
        CacheGeometry geometry = context.geometry();
        List<Map<String, Object>> kernels = new ArrayList<>();
        for (KernelGroup kernel : first(geometry.kernels())) {
            kernels.add(kernelGroup(context, kernel));
        }
        List<Map<String, Object>> objects = new ArrayList<>();
        for (ObjectGroup group : first(geometry.objects())) {
            Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("object_group_idx", group.index());
            entry.put("kind", group.kind().wireName());
            entry.put("window_chunks", group.windowChunks());
            entry.put("object_bytes", group.objectBytes());
            entry.put("kernel_group_idxs", group.kernels().stream().map(KernelGroup::index).toList());
            objects.add(entry);
        }
        Map<String, Object> kvLayout = new LinkedHashMap<>();
        kvLayout.put("num_layers", geometry.numLayers());
        kvLayout.put("num_blocks", geometry.firstLayout().numBlocks());
        kvLayout.put("cache_size_per_token", geometry.cacheSizePerToken(chunkSize));
        kvLayout.put("num_kernel_groups", geometry.kernels().size());
        // groups with prefix_cacheable false (a scratch ring): registered, never stored
        kvLayout.put("num_skipped_groups", geometry.blockLists() - geometry.kernels().size());
        kvLayout.put("num_object_groups", geometry.objects().size());
        kvLayout.put("kernel_groups", kernels);
        kvLayout.put("object_groups", objects);
        return kvLayout;
    }

    /** The groups /status lists: at most {@link #MAX_GROUPS} (a REGISTER may bring thousands), counted in full beside them. */
    private static <T> List<T> first(List<T> groups) {
        return groups.subList(0, Math.min(groups.size(), MAX_GROUPS));
    }

    private static Map<String, Object> kernelGroup(InstanceContext context, KernelGroup kernel) {
        KvLayout layout = kernel.layout();
        TensorWrapper first = context.wrappers().get(kernel.tensorIds()[0]);
        Map<String, Object> group = new LinkedHashMap<>();
        group.put("kernel_group_idx", kernel.index());
        group.put("engine_group_idx", kernel.engineGroupId());
        group.put("object_group_idx", context.geometry().objectGroupOfKernel()[kernel.index()]);
        group.put("num_layers", layout.numLayers());
        group.put("layer_indices", layout.crossLayer() ? IntStream.range(0, layout.numLayers()).boxed().toList()
                : Arrays.stream(kernel.tensorIds()).boxed().toList());
        group.put("tokens_per_block", kernel.tokensPerBlock());
        group.put("slots_per_block", layout.blockSize());
        group.put("compress_ratio", kernel.tokensPerBlock() / layout.blockSize());
        group.put("sw_size_tokens", kernel.windowTokens());
        group.put("recurrent_state", kernel.recurrent());
        if (context.geometry().hybrid()) {
            // DeepSeek V4.1's appended fields as the client sent them (group_view.py); informational here
            EngineGroupInfo.Tail tail = context.geometry().infos().get(kernel.index()).tail();
            group.put("cache_role", LogText.status(tail.cacheRole()));
            group.put("is_index_group_leader", tail.indexGroupLeader());
            group.put("tokens_per_state", tail.tokensPerState());
        }
        group.put("dtype", "torch." + first.dtype().torchName());
        group.put("engine_kv_concrete_shape", kernel.tensorIds().length + " x " + Arrays.toString(first.shape()));
        group.put("is_mla", layout.kind() == KvLayout.Kind.MLA || layout.kind() == KvLayout.Kind.SGLANG_MLA);
        group.put("engine_kv_format", layout.kind().name() + (layout.hnd() ? "_HND" : "_NHD"));
        group.put("engine_kv_shape", layout.kind().description());
        group.put("attention_backend", layout.kind().name());
        // ours: whether this group's segments are LMCache's KV_2LTD (shared with NHD workers and LMCache servers) or the
        // block-order fallback of a GPU whose PTX lacks the transposing kernel (named apart in L2)
        group.put("object_layout", layout.lmcacheObjectLayout() ? "KV_2LTD" : "block_order");
        return group;
    }
}
