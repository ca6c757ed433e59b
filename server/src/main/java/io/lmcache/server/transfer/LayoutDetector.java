package io.lmcache.server.transfer;

import io.lmcache.server.cuda.HeadTranspose;
import io.lmcache.server.protocol.DType;
import io.lmcache.server.protocol.LayoutHints;
import io.lmcache.server.protocol.TensorWrapper;
import java.util.Arrays;
import java.util.List;

/**
 * Recognises vLLM's KV-cache layouts from the registered tensors (protocol doc §6.4, LMCache's
 * vLLM detector): NHD unless {@code layout_hints.kv_layout == "HND"}; the block size comes from the
 * shape. Shapes and strides describe the physical layout, so a block's piece must be contiguous;
 * the block stride comes from the stride, as vLLM's hybrid allocator packs several layers' pages
 * into one buffer. One call per kernel group ({@link KernelGroups}).
 */
public final class LayoutDetector {
    /** Where each dimension of the 5-D and 6-D shape grammar sits ({@link #fiveDimOrCross}); {@code layer} -1: per-layer tensors. */
    private record Dims(int block, int plane, int x, int y, int headSize, int layer) {}

    /** The registered tensors' common shape, strides and dtype, and each tensor's byte offset in its storage. */
    private record Views(long[] shape, long[] stride, DType dtype, long[] bases) {}

    /** {@code [nb, nl, 2, bs, nh, hs]}. */
    private static final Dims CROSS_LAYER = new Dims(0, 2, 3, 4, 5, 1);
    /** {@code [2, nb, bs, nh, hs]}. */
    private static final Dims FLASH_ATTENTION = new Dims(1, 0, 2, 3, 4, -1);
    /** {@code [nb, 2, bs, nh, hs]}. */
    private static final Dims FLASH_INFER = new Dims(0, 1, 2, 3, 4, -1);

    private LayoutDetector() {}

    /** The layout of one kernel group's tensors (all of a registration's tensors when it has no groups). */
    public static KvLayout detect(List<TensorWrapper> tensors, LayoutHints hints, int chunkSize) throws LayoutException {
        if (tensors.isEmpty()) {
            throw new LayoutException("no KV-cache tensors registered");
        }
        TensorWrapper first = uniform(tensors);
        boolean hnd = hints.isHnd();
        long[] shape = first.shape();
        long[] stride = first.stride();
        int es = first.dtype().elementSize();
        long[] bases = new long[tensors.size()];
        for (int i = 0; i < bases.length; i++) {
            bases[i] = tensors.get(i).storageOffset() * es;
        }
        Views views = new Views(shape, stride, first.dtype(), bases);
        KvLayout layout;
        if (tensors.size() == 1 && shape.length == 6) {
            // [nb, nl, 2, bs, nh, hs] (HND: [nb, nl, 2, nh, bs, hs])
            require(shape[2] == 2, shape, "the cross-layer layout has K/V at dim 2");
            layout = fiveDimOrCross(KvLayout.Kind.CROSS_LAYER, hnd, views, (int) shape[1], CROSS_LAYER);
        } else if (shape.length == 5 && shape[0] == 2) {
            layout = fiveDimOrCross(KvLayout.Kind.FLASH_ATTENTION, hnd, views, tensors.size(), FLASH_ATTENTION);
        } else if (shape.length == 5 && shape[1] == 2) {
            // a lone head makes NHD and HND byte-identical; LMCache's detector reads it as NHD
            boolean effectiveHnd = hnd && !(shape[3] == 1 && shape[2] != 1);
            layout = fiveDimOrCross(KvLayout.Kind.FLASH_INFER, effectiveHnd, views, tensors.size(), FLASH_INFER);
        } else if (shape.length == 4) {
            layout = fused(hnd, shape, stride, first.dtype(), bases, tensors.size());
        } else if (shape.length == 3) {
            layout = mla(shape, stride, first.dtype(), bases, tensors.size());
        } else {
            throw new LayoutException("unsupported KV-cache tensor shape " + Arrays.toString(shape) + " (" + tensors.size()
                    + " tensor(s)); supported: " + supportedShapes());
        }
        if (layout.blockSize() <= 0 || chunkSize % layout.blockSize() != 0) {
            throw new LayoutException("block size " + layout.blockSize() + " (from shape " + Arrays.toString(shape)
                    + ") must divide the chunk size " + chunkSize);
        }
        if (hints.tokensPerBlock() > 0 && hints.tokensPerBlock() != layout.blockSize()) {
            throw new LayoutException("layout_hints.tokens_per_block " + hints.tokensPerBlock() + " disagrees with the block size "
                    + layout.blockSize() + " of shape " + Arrays.toString(shape) + " read as " + (layout.hnd() ? "HND" : "NHD"));
        }
        checkSpan(tensors, es);
        return layout.headMajorBlocks() && !canTranspose(first, layout) ? layout.withBlockOrder() : layout;
    }

    /** The first of {@code tensors}, once every one is supported and has its dtype, shape, stride and device. */
    static TensorWrapper uniform(List<TensorWrapper> tensors) throws LayoutException {
        TensorWrapper first = tensors.getFirst();
        for (TensorWrapper tensor : tensors) {
            if (tensor instanceof TensorWrapper.Unsupported unsupported) {
                throw new LayoutException(unsupported.className() + ": " + unsupported.reason());
            }
            if (tensor.dtype() != first.dtype() || !Arrays.equals(tensor.shape(), first.shape())
                    || !Arrays.equals(tensor.stride(), first.stride()) || !tensor.deviceUuid().equals(first.deviceUuid())) {
                throw new LayoutException("registered tensors differ in dtype, shape, stride or device: " + describe(first) + " vs "
                        + describe(tensor));
            }
        }
        return first;
    }

    /**
     * Whether the copy path of these tensors can transpose the layout's head-major blocks into LMCache's token-major objects:
     * the host path always can; the GPU path when the loaded PTX has the transposing kernel (a PTX built before it lacks it,
     * and then the blocks keep their order and the objects are named apart, never written in the wrong order). The shape must
     * fit the kernel's descriptor ({@link HeadTranspose#fits}).
     */
    static boolean canTranspose(TensorWrapper first, KvLayout layout) {
        boolean fits = HeadTranspose.fits(layout.subBlocks(), layout.blockSize(), layout.rowBytes());
        return fits && (first instanceof TensorWrapper.CpuShm || HeadTranspose.kernelInPtx());
    }

    /**
     * 5-D per-layer tensors and the 6-D cross-layer tensor share one shape grammar: dims for block,
     * plane, X, Y (X=bs, Y=nh for NHD; swapped for HND), head size, and (cross-layer) layer.
     */
    private static KvLayout fiveDimOrCross(KvLayout.Kind kind, boolean hnd, Views views, int numLayers, Dims dims) throws LayoutException {
        long[] shape = views.shape();
        long[] stride = views.stride();
        DType dtype = views.dtype();
        int blockDim = dims.block();
        int planeDim = dims.plane();
        int xDim = dims.x();
        int yDim = dims.y();
        int hsDim = dims.headSize();
        int layerDim = dims.layer();
        int es = dtype.elementSize();
        int x = (int) shape[xDim];
        int y = (int) shape[yDim];
        int hs = (int) shape[hsDim];
        require(stride[hsDim] == 1 && stride[yDim] == hs && stride[xDim] == (long) y * hs, shape,
                "a block must be contiguous (strides " + Arrays.toString(stride) + ")");
        int blockSize = hnd ? y : x;
        int heads = hnd ? x : y;
        long piece = (long) x * y * hs * es;
        return new KvLayout(kind, hnd, numLayers, (int) shape[blockDim], blockSize, heads, hs, 2, dtype, piece,
                hnd ? heads : 1, hnd ? (long) hs * es : (long) heads * hs * es, stride[blockDim] * es, stride[planeDim] * es,
                layerDim < 0 ? 0 : stride[layerDim] * es, views.bases(), false);
    }

    /** {@code [nb, bs, nh, 2*hs]} (HND {@code [nb, nh, bs, 2*hs]}): one plane, K and V packed per head. */
    private static KvLayout fused(boolean hnd, long[] shape, long[] stride, DType dtype, long[] bases, int numLayers) throws LayoutException {
        int es = dtype.elementSize();
        int x = (int) shape[1];
        int y = (int) shape[2];
        int packed = (int) shape[3];
        require(packed % 2 == 0, shape, "the fused K/V dimension must be even");
        require(stride[3] == 1 && stride[2] == packed && stride[1] == (long) y * packed, shape,
                "a block must be contiguous (strides " + Arrays.toString(stride) + ")");
        int blockSize = hnd ? y : x;
        int heads = hnd ? x : y;
        return new KvLayout(KvLayout.Kind.FUSED, hnd, numLayers, (int) shape[0], blockSize, heads, packed / 2, 1, dtype,
                (long) x * y * packed * es, hnd ? heads : 1, hnd ? (long) packed * es : (long) heads * packed * es, stride[0] * es, 0, 0,
                bases, false);
    }

    /** {@code [nb, bs, hs]}: one latent vector per token. */
    private static KvLayout mla(long[] shape, long[] stride, DType dtype, long[] bases, int numLayers) throws LayoutException {
        int es = dtype.elementSize();
        int blockSize = (int) shape[1];
        int hs = (int) shape[2];
        require(stride[2] == 1 && stride[1] == hs, shape, "a block must be contiguous (strides " + Arrays.toString(stride) + ")");
        return new KvLayout(KvLayout.Kind.MLA, false, numLayers, (int) shape[0], blockSize, 1, hs, 1, dtype,
                (long) blockSize * hs * es, 1, (long) hs * es, stride[0] * es, 0, 0, bases, false);
    }

    /** Every view must fit in the storage the wrapper says it has. */
    static void checkSpan(List<TensorWrapper> tensors, int es) throws LayoutException {
        for (TensorWrapper tensor : tensors) {
            long spanBytes = tensor.storageElementsSpanned() * es;
            long available = switch (tensor) {
                case TensorWrapper.CpuShm shm -> shm.nbytes();
                case TensorWrapper.CudaIpc ipc -> ipc.handle().storageSizeBytes();
                case TensorWrapper.RawCudaIpc raw -> raw.nbytes();
                case TensorWrapper.VmmCudaIpc vmm -> vmm.nbytes();
                case TensorWrapper.Unsupported unsupported -> 0;
            };
            if (spanBytes > available) {
                throw new LayoutException("tensor " + describe(tensor) + " spans " + spanBytes + " bytes but its storage has " + available);
            }
        }
    }

    private static void require(boolean condition, long[] shape, String rule) throws LayoutException {
        if (!condition) {
            throw new LayoutException("unsupported KV-cache tensor shape " + Arrays.toString(shape) + ": " + rule);
        }
    }

    private static String describe(TensorWrapper tensor) {
        return tensor.dtype().torchName() + Arrays.toString(tensor.shape()) + " stride " + Arrays.toString(tensor.stride()) + " on "
                + tensor.deviceUuid();
    }

    public static String supportedShapes() {
        return "[2, nb, bs, nh, hs] (FlashAttention; HND [2, nb, nh, bs, hs]), [nb, 2, bs, nh, hs] (FlashInfer), "
                + "[nb, bs, nh, 2*hs] (fused K/V), [nb, bs, hs] (MLA), one [nb, nl, 2, bs, nh, hs] tensor (cross-layer)";
    }
}
