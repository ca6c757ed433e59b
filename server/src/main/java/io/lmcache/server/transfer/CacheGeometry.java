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
 * @param kernels the prefix-cacheable kernel groups; a group with {@code prefix_cacheable} false (a scratch ring) has none
 * @param objectGroupOfKernel per {@code engine_group_infos} entry (the wire position), its object group; -1 for a skipped group
 * @param hybrid the client sent {@code engine_group_infos}: it hands out vLLM's null block (id 0)
 *     for blocks it does not hold, so a chunk whose kept ids are all 0 is not stored. An older
 *     client's block 0 is a real block.
 * @param infos the {@code engine_group_infos} this geometry was built from (empty: a non-hybrid registration)
 */
public record CacheGeometry(List<KernelGroup> kernels, List<ObjectGroup> objects, int[] objectGroupOfKernel, boolean hybrid,
        List<EngineGroupInfo> infos) {
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
        int[] owner = new int[Math.max(1, infos.size())];
        Arrays.fill(owner, -1);
        for (ObjectGroup group : objects) {
            for (KernelGroup kernel : group.kernels()) {
                owner[kernel.index()] = group.index();
            }
        }
        return new CacheGeometry(kernels, objects, owner, !infos.isEmpty(), List.copyOf(infos));
    }

    /** Block lists a STORE or RETRIEVE sends: one per {@code engine_group_infos} entry, skipped groups too (one for none). */
    public int blockLists() {
        return objectGroupOfKernel.length;
    }

    /** Whether {@code infos} are the groups this geometry was built from: a re-REGISTER with other groups replaces the instance. */
    public boolean builtFrom(List<EngineGroupInfo> sent) {
        if (sent.size() != infos.size()) {
            return false;
        }
        for (int i = 0; i < sent.size(); i++) {
            EngineGroupInfo a = sent.get(i);
            EngineGroupInfo b = infos.get(i);
            if (a.engineGroupId() != b.engineGroupId() || !Arrays.equals(a.layerIndices(), b.layerIndices())
                    || a.tokensPerBlock() != b.tokensPerBlock() || a.swSizeTokens() != b.swSizeTokens()
                    || a.extraObjectGroupTag() != b.extraObjectGroupTag() || a.recurrentState() != b.recurrentState()
                    || !a.tail().equals(b.tail())) {
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
