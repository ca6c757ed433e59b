package io.lmcache.server.transfer;

import io.lmcache.server.liveness.InstanceRegistry;
import io.lmcache.server.loop.PeerConnections;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;

/** LMCache's {@code registered_gpu_ids} and {@code cache_context_meta} /status entries for the LMCache-driven instances. */
public final class InstanceStatus {
    private InstanceStatus() {}

    public static void put(Map<String, Object> status, List<InstanceRegistry.Registered<InstanceContext>> instances,
            PeerConnections connections) {
        List<Long> ids = new ArrayList<>();
        Map<String, Object> meta = new LinkedHashMap<>();
        for (InstanceRegistry.Registered<InstanceContext> registered : instances) {
            InstanceContext context = registered.context();
            ids.add(context.instanceId());
            Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("model_name", context.modelName());
            entry.put("world_size", context.worldSize());
            entry.put("kv_cache_layout", kvLayout(context));
            entry.put("connection_closed", connections.closedSinceNs(registered.peer()) >= 0);
            meta.put(Long.toString(context.instanceId()), entry);
        }
        status.put("registered_gpu_ids", ids);
        status.put("cache_context_meta", meta);
    }

    private static Map<String, Object> kvLayout(InstanceContext context) {
        KvLayout layout = context.layout();
        Map<String, Object> group = new LinkedHashMap<>();
        group.put("kernel_group_idx", 0);
        group.put("engine_group_idx", 0);
        group.put("object_group_idx", 0);
        group.put("num_layers", layout.numLayers());
        group.put("layer_indices", IntStream.range(0, layout.numLayers()).boxed().toList());
        group.put("tokens_per_block", layout.blockSize());
        group.put("slots_per_block", layout.blockSize());
        group.put("dtype", "torch." + context.wrappers().getFirst().dtype().torchName());
        group.put("engine_kv_concrete_shape", Arrays.toString(context.wrappers().getFirst().shape()));
        group.put("is_mla", layout.kind() == KvLayout.Kind.MLA);
        group.put("engine_kv_format", layout.kind().name() + (layout.hnd() ? "_HND" : "_NHD"));
        group.put("engine_kv_shape", layout.kind().description());
        group.put("attention_backend", layout.kind().name());
        Map<String, Object> kvLayout = new LinkedHashMap<>();
        kvLayout.put("num_layers", layout.numLayers());
        kvLayout.put("num_blocks", layout.numBlocks());
        kvLayout.put("cache_size_per_token", layout.bytesPerToken());
        kvLayout.put("kernel_groups", List.of(group));
        return kvLayout;
    }
}
