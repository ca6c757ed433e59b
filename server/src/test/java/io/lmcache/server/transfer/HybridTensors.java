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
}
