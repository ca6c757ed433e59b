package io.lmcache.server.transfer;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Buckets kernel groups into object groups (hybrid-and-l2.md §A.4): with separation on, by
 * {@code (extra tag, recurrent, window in chunks)}, ordered by their first kernel group; with it
 * off, everything in one object group treated as full attention.
 */
public final class ObjectGroups {
    private ObjectGroups() {}

    private record Bucket(int extraTag, boolean recurrent, int windowChunks) {}

    public static List<ObjectGroup> bucket(List<KernelGroup> kernels, int chunkSize, boolean separate) {
        if (!separate) {
            return List.of(objectGroup(0, GroupKind.ATTENTION, -1, kernels));
        }
        Map<Bucket, List<KernelGroup>> buckets = new LinkedHashMap<>();
        for (KernelGroup kernel : kernels) {
            Bucket bucket = new Bucket(kernel.extraTag(), kernel.recurrent(), kernel.windowChunks(chunkSize));
            buckets.computeIfAbsent(bucket, b -> new ArrayList<>()).add(kernel);
        }
        List<ObjectGroup> groups = new ArrayList<>(buckets.size());
        for (Map.Entry<Bucket, List<KernelGroup>> entry : buckets.entrySet()) {
            groups.add(objectGroup(groups.size(), entry.getValue().getFirst().kind(), entry.getKey().windowChunks(), entry.getValue()));
        }
        return List.copyOf(groups);
    }

    private static ObjectGroup objectGroup(int index, GroupKind kind, int windowChunks, List<KernelGroup> kernels) {
        long[] offsets = new long[kernels.size()];
        long bytes = 0;
        for (int i = 0; i < offsets.length; i++) {
            offsets[i] = bytes;
            bytes += kernels.get(i).segmentBytes();
        }
        return new ObjectGroup(index, kind, windowChunks, List.copyOf(kernels), offsets, bytes, format(kernels));
    }

    /** Whether every segment of the group's objects is in LMCache's object layout (then L2 names them as LMCache does). */
    public static boolean lmcacheObjectLayout(ObjectGroup group) {
        return group.kernels().stream().allMatch(k -> k.layout().lmcacheObjectLayout());
    }

    /**
     * The group's object format as L2 records it ({@code l2.L2Key#layout}): {@code v1}, then each segment's
     * ({@link KvLayout#segmentFormat}) in kernel-group order, its kept window when it keeps less than the chunk.
     */
    public static String l2Layout(ObjectGroup group) {
        StringBuilder text = new StringBuilder("v1");
        for (KernelGroup kernel : group.kernels()) {
            text.append(' ').append(kernel.layout().segmentFormat(kernel.blocksKept()));
            if (kernel.blocksKept() != kernel.blocksPerChunk()) {
                text.append(" kept").append(kernel.blocksKept()).append('/').append(kernel.blocksPerChunk());
            }
            if (kernel.compressed()) {
                text.append(" tpb").append(kernel.tokensPerBlock());
            }
            text.append(';');
        }
        return text.toString();
    }

    /**
     * A lone group that keeps whole chunks has the plain layout format (the objects the engine-driven
     * path shares); anything else a hash of every segment's identity, with the top bit set so it
     * never equals a plain one.
     */
    static int format(List<KernelGroup> kernels) {
        KernelGroup first = kernels.getFirst();
        if (kernels.size() == 1 && first.blocksKept() == first.blocksPerChunk()) {
            return first.layout().format();
        }
        int hash = kernels.size();
        for (KernelGroup kernel : kernels) {
            KvLayout layout = kernel.layout();
            hash = 31 * hash + layout.format();
            hash = 31 * hash + layout.kind().ordinal();
            hash = 31 * hash + layout.numLayers();
            hash = 31 * hash + layout.numHeads();
            hash = 31 * hash + layout.headSize();
            hash = 31 * hash + kernel.blocksPerChunk();
            hash = 31 * hash + kernel.blocksKept();
            if (kernel.compressed()) {
                hash = 31 * hash + kernel.tokensPerBlock(); // only then: the formats of uncompressed groups stay as they were
            }
        }
        return hash | Integer.MIN_VALUE;
    }
}
