package io.lmcache.server.transfer;

import io.lmcache.server.protocol.EngineGroupInfo;
import io.lmcache.server.protocol.LayoutHints;
import io.lmcache.server.protocol.TensorWrapper;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.IntStream;

/**
 * Builds a registration's kernel groups from its tensors and {@code engine_group_infos}
 * (hybrid-and-l2.md §A.2, §A.9): one group per info, in wire order, each with the layout of its
 * tensors; tensors no info lists are excluded (vLLM's KV-sharing layers). Geometries this server
 * cannot serve correctly are refused here with the reason, never accepted and served wrong.
 */
public final class KernelGroups {
    private KernelGroups() {}

    public static List<KernelGroup> detect(List<TensorWrapper> wrappers, LayoutHints hints, List<EngineGroupInfo> infos, int chunkSize)
            throws LayoutException {
        return detect(wrappers, hints, infos, chunkSize, "vllm");
    }

    /** As above, for a registration from {@code engineType}: SGLang's flat pool list is read by {@link SglangLayouts}. */
    public static List<KernelGroup> detect(List<TensorWrapper> wrappers, LayoutHints hints, List<EngineGroupInfo> infos, int chunkSize,
            String engineType) throws LayoutException {
        boolean sglang = SglangLayouts.isSglang(engineType);
        if (sglang && !infos.isEmpty()) {
            // SGLang's unified connector (LMCache#4828, in review) sends vLLM-shaped groups of its own tensors: not read as vLLM's
            throw new LayoutException("an SGLang registration with engine_group_infos (SGLang's unified connector) is not served yet");
        }
        if (infos.isEmpty()) {
            // no infos: one non-hybrid group of every tensor
            KvLayout layout = sglang ? SglangLayouts.detect(wrappers, hints, chunkSize) : LayoutDetector.detect(wrappers, hints, chunkSize);
            int blocks = layout.blocksPerChunk(chunkSize);
            return List.of(new KernelGroup(0, 0, IntStream.range(0, wrappers.size()).toArray(), layout, layout.blockSize(),
                    EngineGroupInfo.FULL_ATTENTION, 0, false, blocks, blocks));
        }
        // one tokens_per_block hint cannot describe groups of different block sizes
        LayoutHints groupHints = infos.size() > 1 ? new LayoutHints(hints.kvLayout(), 0, 0, 0) : hints;
        int[] owner = new int[wrappers.size()];
        Arrays.fill(owner, -1);
        List<KernelGroup> groups = new ArrayList<>(infos.size());
        for (int g = 0; g < infos.size(); g++) {
            EngineGroupInfo info = infos.get(g);
            String name = "kernel group " + g + " (engine group " + info.engineGroupId() + ")";
            int[] layers = info.layerIndices();
            List<TensorWrapper> tensors = claim(name, layers, wrappers, owner, g);
            if (!info.prefixCacheable()) {
                // a per-request scratch ring (vLLM's CircularBufferSpec, DeepSeek-V4.1's compressor state): never stored, never
                // required for a hit, its tensors never read; LMCache skips it end to end (recipes/deepseek_v41_flash.rst)
                continue;
            }
            KvLayout layout;
            try {
                layout = LayoutDetector.detect(tensors, groupHints, chunkSize);
            } catch (LayoutException e) {
                throw new LayoutException(name + ", layers " + Arrays.toString(layers) + ": " + e.getMessage());
            }
            GroupTail.check(name, info.tail(), layout, chunkSize);
            groups.add(group(g, name, info, layers.clone(), layout, chunkSize));
        }
        if (groups.isEmpty()) {
            throw new LayoutException("no kernel group is prefix_cacheable: there is nothing to store");
        }
        return List.copyOf(groups);
    }

    /** The tensors of one group's layers, each claimed for it: an index out of range or listed twice is refused. */
    private static List<TensorWrapper> claim(String name, int[] layers, List<TensorWrapper> wrappers, int[] owner, int g)
            throws LayoutException {
        if (layers.length == 0) {
            throw new LayoutException(name + " lists no layers");
        }
        List<TensorWrapper> tensors = new ArrayList<>(layers.length);
        for (int layer : layers) {
            if (layer < 0 || layer >= wrappers.size()) {
                throw new LayoutException(name + ": layer index " + layer + " is outside the " + wrappers.size() + " registered tensors");
            }
            if (owner[layer] >= 0) {
                throw new LayoutException(name + ": layer index " + layer + " is listed by kernel group " + owner[layer] + " too");
            }
            owner[layer] = g;
            tensors.add(wrappers.get(layer));
        }
        return tensors;
    }

    /** Applies the chunk/block divisibility rules (§A.2.2) and the window rules to one group. */
    private static KernelGroup group(int index, String name, EngineGroupInfo info, int[] layers, KvLayout layout, int chunkSize)
            throws LayoutException {
        int slots = layout.blockSize();
        int tokensPerBlock = info.tokensPerBlock() > 0 ? info.tokensPerBlock() : slots;
        if (info.tokensPerBlock() < 0) {
            throw new LayoutException(name + ": tokens_per_block " + info.tokensPerBlock() + " is negative");
        }
        // LMCache's _validate_block_chunk_size_config (kv_layer_groups.py): a compressed group (DeepSeek-V4's MLA and indexer
        // caches) packs tokens_per_block / slots_per_block tokens into one slot; a chunk then covers
        // slots_per_chunk = chunk * slots_per_block / tokens_per_block slots
        if (tokensPerBlock % slots != 0) {
            throw new LayoutException(name + ": tokens_per_block " + tokensPerBlock + " is not a multiple of the " + slots
                    + " slots of a block");
        }
        if (chunkSize % tokensPerBlock != 0) {
            throw new LayoutException(name + ": the chunk size " + chunkSize + " is not a multiple of tokens_per_block " + tokensPerBlock);
        }
        if (info.extraObjectGroupTag() < 0) {
            throw new LayoutException(name + ": extra_object_group_tag " + info.extraObjectGroupTag() + " is negative");
        }
        int window = info.swSizeTokens();
        if (window == 0 || window < EngineGroupInfo.FULL_ATTENTION) {
            throw new LayoutException(name + ": sw_size_tokens " + window + " is neither -1 (full attention) nor a window");
        }
        int blocksPerChunk = chunkSize / tokensPerBlock;
        int kept = blocksPerChunk;
        if (info.recurrentState()) {
            // vLLM sends the block size: one snapshot; -1 from an older client means the same, as only the last state is ever used
            int stateTokens = window < 0 ? tokensPerBlock : window;
            if (stateTokens > chunkSize || stateTokens % tokensPerBlock != 0) {
                throw new LayoutException(name + ": a recurrent-state group's sw_size_tokens " + window + " must be a multiple of"
                        + " tokens_per_block " + tokensPerBlock + " and at most the chunk size " + chunkSize
                        + " (vLLM sends the block size; run --chunk-size N with N the unified block size)");
            }
            kept = stateTokens / tokensPerBlock;
        } else if (window > 0 && window < chunkSize) {
            // a sub-chunk window (DeepSeek-V4): each chunk keeps only its last subchunk_sw / tokens_per_block blocks
            // (kv_layer_groups.py get_subchunk_sw_size_tokens; lmcache_driven_transfer.py blocks_per_window)
            if (window % tokensPerBlock != 0) {
                throw new LayoutException(name + ": its sliding window of " + window + " tokens, smaller than the chunk size " + chunkSize
                        + ", is not a multiple of tokens_per_block " + tokensPerBlock);
            }
            kept = window / tokensPerBlock;
        }
        return new KernelGroup(index, info.engineGroupId(), layers, layout, tokensPerBlock, window, info.extraObjectGroupTag(),
                info.recurrentState(), blocksPerChunk, kept);
    }
}
