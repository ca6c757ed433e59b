package io.lmcache.server.transfer;

import io.lmcache.server.protocol.EngineGroupInfo;
import io.lmcache.server.protocol.LayoutHints;
import io.lmcache.server.protocol.TensorWrapper;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A registered instance's KV-cache geometry: its kernel groups (one block list each in STORE and
 * RETRIEVE) and the object groups they are stored in. A non-hybrid registration has one of each.
 *
 * @param hybrid the client sent {@code engine_group_infos}: it hands out vLLM's null block (id 0)
 *     for blocks it does not hold, so a chunk whose kept ids are all 0 is not stored. An older
 *     client's block 0 is a real block.
 */
public record CacheGeometry(List<KernelGroup> kernels, List<ObjectGroup> objects, int[] objectGroupOfKernel, boolean hybrid) {
    /** Kernel groups a REGISTER's log line describes; the rest are counted. */
    static final int DESCRIBED_GROUPS = 3;

    public static CacheGeometry of(List<TensorWrapper> wrappers, LayoutHints hints, List<EngineGroupInfo> infos, int chunkSize,
            boolean separateObjectGroups) throws LayoutException {
        return of(wrappers, hints, infos, chunkSize, separateObjectGroups, "vllm");
    }

    /** As above, for a registration from {@code engineType} (REGISTER's fifth frame: {@code "vllm"}, {@code "sglang"}). */
    public static CacheGeometry of(List<TensorWrapper> wrappers, LayoutHints hints, List<EngineGroupInfo> infos, int chunkSize,
            boolean separateObjectGroups, String engineType) throws LayoutException {
        List<KernelGroup> kernels = KernelGroups.detect(wrappers, hints, infos, chunkSize, engineType);
        if (!separateObjectGroups && kernels.stream().anyMatch(KernelGroup::recurrent)) {
            // one object per chunk for all groups is stored whenever the attention blocks are real, also where vLLM gave the
            // Mamba group its null block (no snapshot there): a LOOKUP would hit such chunks and a RETRIEVE restore junk state
            throw new LayoutException("recurrent-state (Mamba/GDN) groups need separate object groups: start the server without "
                    + "--no-separate-object-groups");
        }
        List<ObjectGroup> objects = ObjectGroups.bucket(kernels, chunkSize, separateObjectGroups);
        int[] owner = new int[kernels.size()];
        for (ObjectGroup group : objects) {
            for (KernelGroup kernel : group.kernels()) {
                owner[kernel.index()] = group.index();
            }
        }
        return new CacheGeometry(kernels, objects, owner, !infos.isEmpty());
    }

    /** Whether {@code infos} are the groups this geometry was built from: a re-REGISTER with other groups replaces the instance. */
    public boolean builtFrom(List<EngineGroupInfo> infos) {
        if (infos.isEmpty() || infos.size() != kernels.size()) {
            return infos.isEmpty() && !hybrid;
        }
        for (KernelGroup kernel : kernels) {
            EngineGroupInfo info = infos.get(kernel.index());
            int tokensPerBlock = info.tokensPerBlock() > 0 ? info.tokensPerBlock() : kernel.layout().blockSize();
            if (info.engineGroupId() != kernel.engineGroupId() || !Arrays.equals(info.layerIndices(), kernel.tensorIds())
                    || tokensPerBlock != kernel.tokensPerBlock() || info.swSizeTokens() != kernel.windowTokens()
                    || info.extraObjectGroupTag() != kernel.extraTag() || info.recurrentState() != kernel.recurrent()) {
                return false;
            }
        }
        return true;
    }

    /** The layout of a non-hybrid registration (the first kernel group's otherwise). */
    public KvLayout firstLayout() {
        return kernels.getFirst().layout();
    }

    public int numLayers() {
        return kernels.stream().mapToInt(k -> k.layout().numLayers()).sum();
    }

    public long largestObjectBytes() {
        return objects.stream().mapToLong(ObjectGroup::objectBytes).max().orElse(0);
    }

    /** LMCache's {@code cache_size_per_token}: every object group's bytes per chunk, over the chunk size. */
    public long cacheSizePerToken(int chunkSize) {
        return objects.stream().mapToLong(ObjectGroup::objectBytes).sum() / chunkSize;
    }

    public LookupGeometry lookupGeometry() {
        int[] windows = new int[objects.size()];
        GroupKind[] kinds = new GroupKind[objects.size()];
        for (ObjectGroup group : objects) {
            windows[group.index()] = group.windowChunks();
            kinds[group.index()] = group.kind();
        }
        return new LookupGeometry(windows, kinds);
    }

    public String describe() {
        if (kernels.size() == 1) {
            return firstLayout().describe();
        }
        // a REGISTER may bring thousands of groups: the line names the first few (/status lists them, bounded too)
        List<String> groups = new ArrayList<>();
        for (KernelGroup kernel : kernels.subList(0, Math.min(kernels.size(), DESCRIBED_GROUPS))) {
            groups.add("[" + kernel.index() + " -> object group " + objectGroupOfKernel[kernel.index()] + ": " + kernel.kind().wireName()
                    + (kernel.windowTokens() > 0 ? ", window " + kernel.windowTokens() : "") + ", " + kernel.layout().describe() + "]");
        }
        return kernels.size() + " kernel groups in " + objects.size() + " object group(s): " + String.join(" ", groups)
                + (kernels.size() > DESCRIBED_GROUPS ? " ...(" + (kernels.size() - DESCRIBED_GROUPS) + " more)" : "");
    }
}
