package io.lmcache.server.transfer;

import io.lmcache.server.protocol.DType;
import io.lmcache.server.protocol.EngineGroupInfo;
import io.lmcache.server.protocol.LayoutHints;
import io.lmcache.server.protocol.TensorWrapper;
import java.util.ArrayList;
import java.util.List;

/** Registered tensors and group infos of hybrid models, as the geometry tests need them (no memory behind them). */
final class HybridTensors {
    static final LayoutHints NHD = new LayoutHints("NHD", 0, 0, 0);

    private HybridTensors() {}

    /** {@code count} contiguous tensors of one shape. */
    static List<TensorWrapper> tensors(int count, DType dtype, long... shape) {
        List<TensorWrapper> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            out.add(strided(dtype, shape, LayoutDetectorTest.contiguous(shape), 0));
        }
        return out;
    }

    /** One tensor view with the given stride and storage offset (elements), with storage for all of it. */
    static TensorWrapper strided(DType dtype, long[] shape, long[] stride, long offset) {
        TensorWrapper probe = new TensorWrapper.CpuShm("/h", 0, dtype, shape, stride, offset, "cpu");
        long bytes = probe.storageElementsSpanned() * dtype.elementSize();
        return new TensorWrapper.CpuShm("/h" + offset, bytes, dtype, shape, stride, offset, "cpu");
    }

    static List<TensorWrapper> concat(List<TensorWrapper> first, List<TensorWrapper> second) {
        List<TensorWrapper> out = new ArrayList<>(first);
        out.addAll(second);
        return out;
    }

    static EngineGroupInfo info(int engineGroup, int[] layers, int tokensPerBlock, int window, boolean recurrent) {
        return new EngineGroupInfo(engineGroup, layers, tokensPerBlock, window, 0, recurrent);
    }

    /**
     * Gemma-like: layers 0 and 2 sliding-window (window 1024 tokens, blocks of 32, head dim 256),
     * layers 1 and 3 full attention (blocks of 16, head dim 512): two block sizes, one page size.
     */
    static List<TensorWrapper> gemmaTensors(int blocks) {
        List<TensorWrapper> sliding = tensors(1, DType.BFLOAT16, 2, blocks, 32, 1, 256);
        List<TensorWrapper> full = tensors(1, DType.BFLOAT16, 2, blocks, 16, 1, 512);
        return List.of(sliding.getFirst(), full.getFirst(), sliding.getFirst(), full.getFirst());
    }

    static List<EngineGroupInfo> gemmaInfos() {
        return List.of(info(0, new int[] {0, 2}, 32, 1024, false), info(1, new int[] {1, 3}, 16, -1, false));
    }

    /** Qwen-like at chunk size N: layers 0..2 Mamba state pages {@code [nb, 2, N, 1, hs]}, layer 3 full attention with logical blocks of N. */
    static List<TensorWrapper> qwenTensors(int blocks, int n) {
        return concat(tensors(3, DType.BFLOAT16, blocks, 2, n, 1, 96), tensors(1, DType.BFLOAT16, blocks, 2, n, 1, 256));
    }

    static List<EngineGroupInfo> qwenInfos(int n) {
        return List.of(info(0, new int[] {0, 1, 2}, n, n, true), info(1, new int[] {3}, n, -1, false));
    }

    static EngineGroupInfo info(int engineGroup, int[] layers, int tokensPerBlock, int window, EngineGroupInfo.Tail tail) {
        return new EngineGroupInfo(engineGroup, layers, tokensPerBlock, window, 0, false, tail);
    }

    static EngineGroupInfo.Tail tail(int tokensPerState, String role, boolean leader, boolean prefixCacheable) {
        EngineGroupInfo.Tail d = EngineGroupInfo.Tail.DEFAULTS;
        return new EngineGroupInfo.Tail(tokensPerState, role, d.stateContentBytes(), d.blockStrideAlignment(), leader, prefixCacheable,
                d.pageSizePadded(), d.numHeadSlots(), 1, 0);
    }

    /**
     * DeepSeek-V4-Flash-like at chunk 256 (recipes/deepseek_v4_flash.rst; hybrid-kv-cache-groups.md: block sizes
     * 256/64/8/4, compression 4 and 128, fp8 latents as uint8, float32 indexer): layers 0-1 sliding window (window 128,
     * blocks of 64 tokens, MLA 584-byte records), 2-3 the ratio-4 latent (8 tokens on 2 slots), 4-5 the ratio-4 float32 indexer
     * (4 tokens on 1 slot), 6 the ratio-128 latent (256 tokens on 2 slots).
     */
    static List<TensorWrapper> deepseekV4Tensors(int blocks) {
        return concat(concat(tensors(2, DType.UINT8, blocks, 64, 584), tensors(2, DType.UINT8, blocks, 2, 584)),
                concat(tensors(2, DType.FLOAT32, blocks, 1, 32), tensors(1, DType.UINT8, blocks, 2, 584)));
    }

    static List<EngineGroupInfo> deepseekV4Infos() {
        EngineGroupInfo.Tail sparse = EngineGroupInfo.Tail.DEFAULTS;
        return List.of(info(0, new int[] {0, 1}, 64, 128, tail(0, "sparse", false, true)), info(1, new int[] {2, 3}, 8, -1, sparse),
                info(2, new int[] {4, 5}, 4, -1, tail(1, "indexer", true, true)), info(3, new int[] {6}, 256, -1, sparse));
    }

    /**
     * DeepSeek-V4.1-Flash-like at chunk 256 (recipes/deepseek_v41_flash.rst): two sliding-window groups (window 128, blocks of
     * 32), the ratio-2 compressed KV and its uint8 indexer sharing one engine group (blocks of 64 tokens on 32 slots,
     * tokens_per_state 2), and the compressor scratch ring (prefix_cacheable false, a shape no layout reads).
     */
    static List<TensorWrapper> deepseekV41Tensors(int blocks) {
        return concat(concat(tensors(4, DType.UINT8, blocks, 32, 584), concat(tensors(1, DType.UINT8, blocks, 32, 584),
                tensors(1, DType.UINT8, blocks, 32, 132))), tensors(1, DType.FLOAT32, 3, blocks, 7, 5, 2));
    }

    static List<EngineGroupInfo> deepseekV41Infos() {
        EngineGroupInfo.Tail window = tail(0, "sparse", false, true);
        EngineGroupInfo.Tail compressed = tail(2, "sparse", false, true);
        return List.of(info(0, new int[] {0, 1}, 32, 128, window), info(1, new int[] {2, 3}, 32, 128, window),
                info(2, new int[] {4}, 64, -1, compressed), info(2, new int[] {5}, 64, -1, compressed),
                info(3, new int[] {6}, 0, -1, tail(1, "sparse", false, false)));
    }
}
