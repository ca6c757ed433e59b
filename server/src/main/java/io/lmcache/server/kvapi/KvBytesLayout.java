package io.lmcache.server.kvapi;

import io.lmcache.server.protocol.DType;
import io.lmcache.server.transfer.KernelGroup;
import io.lmcache.server.transfer.KvLayout;
import io.lmcache.server.transfer.ObjectGroup;
import java.util.List;

/**
 * A registered model's layout as the KV bytes API sees it: LMCache's v1 supports exactly one KV layer group whose chunk objects
 * are {@code KV_2LTD} ({@code [planes, layers, chunk, D / world_size]}, row-major), so the wire's {@code [planes, layers, tokens, D]}
 * is the shards concatenated along D and the chunks along the tokens (LMCache {@code mp/http_apis/kv_api.py}, index id 63013598693).
 *
 * @param planeLayers planes x layers: the rows of tokens in an object and on the wire
 * @param shardRowBytes one token's bytes of one plane and layer in one worker's shard
 * @param planes K and V (2), or 1 (MLA): the first dimension of the stream revision's shapes
 * @param dtype the registered dtype, which the stream revision names in its manifests
 */
public record KvBytesLayout(int worldSize, int planeLayers, long shardRowBytes, int chunkSize, long objectBytes, int format, int planes,
        DType dtype) {

    /** Bytes of one chunk on the wire: every shard of every row. */
    public long chunkWireBytes() {
        return (long) worldSize * objectBytes;
    }

    /** The layout of one registration, or null when it is not LMCache's v1 (several groups, a window, a non-LMCache object layout). */
    public static KvBytesLayout of(int worldSize, List<ObjectGroup> groups, int chunkSize) {
        if (groups.size() != 1 || groups.getFirst().kernels().size() != 1) {
            return null;
        }
        ObjectGroup group = groups.getFirst();
        KernelGroup kernel = group.kernels().getFirst();
        KvLayout layout = kernel.layout();
        if (!group.fullAttention() || kernel.compressed() || kernel.blocksKept() != kernel.blocksPerChunk() || !layout.lmcacheObjectLayout()
                || layout.crossLayer()) {
            return null;
        }
        int planeLayers = layout.planes() * layout.numLayers();
        long perToken = layout.bytesPerToken();
        if (planeLayers <= 0 || perToken % planeLayers != 0 || perToken * chunkSize != group.objectBytes()) {
            return null;
        }
        return new KvBytesLayout(worldSize, planeLayers, perToken / planeLayers, chunkSize, group.objectBytes(), group.format(),
                layout.planes(), layout.dtype());
    }

    /** One worker's shard of a chunk, {@code [planes, layers, chunk, D / world_size]} (LMCache's {@code per_shard_shape}). */
    public int[] shardShape() {
        return new int[] {planes, planeLayers / planes, chunkSize, Math.toIntExact(shardRowBytes / dtype.elementSize())};
    }

    /** The un-sharded {@code [planes, layers, tokens, D]} of {@code tokens} tokens. */
    public int[] fullShape(int tokens) {
        int[] shard = shardShape();
        return new int[] {shard[0], shard[1], tokens, shard[3] * worldSize};
    }

    /** The dtype as LMCache's manifests write it ({@code str(torch.dtype)}). */
    public String torchDtype() {
        return "torch." + dtype.torchName();
    }
}
