package io.lmcache.server.transfer;

import io.lmcache.server.protocol.DType;
import io.lmcache.server.protocol.LayoutHints;
import io.lmcache.server.protocol.TensorWrapper;
import java.util.Arrays;
import java.util.List;

/**
 * SGLang's KV pools as its LMCache MP connector registers them (engine type {@code "sglang"}, six REGISTER frames): a flat list
 * of 3-D tensors {@code [page_buffer_size, heads, head size]}, every layer's K pool then every layer's V pool
 * ({@code LMCache/LMCache:lmcache/integration/sglang/multi_process_adapter.py@6f45e604}, {@code _wrap_sglang_kv_caches}), and
 * {@code layout_hints {"tokens_per_block": page_size}}. LMCache's SGLang detector
 * ({@code lmcache/v1/gpu_connector/kv_format/detectors/sglang.py@1f979e84}) reads an even count of such tensors with
 * {@code shape[1] > 1} as K then V, each viewed as {@code [page_buffer_size / page, page, heads, head size]}
 * ({@code TWO_X_NL_X_NB_BS_NH_HS}), and tensors with {@code shape[1] == 1} as MLA ({@code NL_X_NBBS_ONE_HS}); so does this.
 * A page id {@code b} covers slots {@code [b * page, (b + 1) * page)}; page 0 is SGLang's padding page (its allocator hands out
 * pages from 1: {@code sgl-project/sglang:python/sglang/srt/mem_cache/allocator.py}, "The padded slot 0 is used for writing
 * dummy outputs from padded tokens", index id 60421328412), which {@link TransferPlanner} never copies to or from.
 *
 * <p>The objects are LMCache's {@code KV_2LTD}, as for vLLM's NHD layouts: the same prompt stored by SGLang and by a vLLM of the
 * same model, dtype and world size has the same bytes (and is one object).
 */
public final class SglangLayouts {
    /** The engine type SGLang's connector sends ({@code EngineType.SGLANG}). */
    public static final String ENGINE = "sglang";
    /** SGLang's padding page: never a real page of a request. */
    public static final int NULL_PAGE = 0;

    private SglangLayouts() {}

    /** Whether a registration with this engine type is read as SGLang's flat pool list. */
    public static boolean isSglang(String engineType) {
        return ENGINE.equals(engineType);
    }

    /** The layout of SGLang's flat K-then-V (or MLA) pool list; refuses what LMCache's detector would not take, with the reason. */
    public static KvLayout detect(List<TensorWrapper> tensors, LayoutHints hints, int chunkSize) throws LayoutException {
        if (tensors.isEmpty()) {
            throw new LayoutException("SGLang registered no KV pools");
        }
        TensorWrapper first = LayoutDetector.uniform(tensors);
        long[] shape = first.shape();
        long[] stride = first.stride();
        if (shape.length != 3) {
            throw new LayoutException("SGLang pools are 3-D [page_buffer_size, heads, head size], got " + Arrays.toString(shape)
                    + " (SGLang's unified connector, with engine_group_infos, is not served yet)");
        }
        int page = hints.tokensPerBlock();
        if (page <= 0) {
            throw new LayoutException("an SGLang registration needs layout_hints.tokens_per_block (its page size)");
        }
        if (chunkSize % page != 0) {
            throw new LayoutException("SGLang's page size " + page + " must divide the chunk size " + chunkSize);
        }
        DType dtype = first.dtype();
        int es = dtype.elementSize();
        long slots = shape[0];
        int heads = (int) shape[1];
        int headSize = (int) shape[2];
        if (slots % page != 0) {
            throw new LayoutException("SGLang's page_buffer_size " + slots + " is not a multiple of tokens_per_block " + page);
        }
        if (stride[2] != 1 || stride[1] != headSize || stride[0] != (long) heads * headSize) {
            throw new LayoutException("SGLang pool " + Arrays.toString(shape) + " is not contiguous (strides " + Arrays.toString(stride) + ")");
        }
        long[] bases = new long[tensors.size()];
        for (int i = 0; i < bases.length; i++) {
            bases[i] = tensors.get(i).storageOffset() * es;
        }
        int blocks = (int) (slots / page);
        long rowBytes = (long) heads * headSize * es;
        long pieceBytes = page * rowBytes;
        KvLayout layout;
        if (heads == 1) {
            // LMCache's detector: shape[1] == 1 is MLA, one latent vector per slot, every tensor a layer
            layout = new KvLayout(KvLayout.Kind.SGLANG_MLA, false, tensors.size(), blocks, page, 1, headSize, 1, dtype, pieceBytes, 1,
                    rowBytes, pieceBytes, 0, 0, bases, false);
        } else {
            if (tensors.size() % 2 != 0) {
                throw new LayoutException("SGLang registers K pools then V pools: an even number of tensors, got " + tensors.size());
            }
            layout = new KvLayout(KvLayout.Kind.SGLANG_MHA, false, tensors.size() / 2, blocks, page, heads, headSize, 2, dtype, pieceBytes,
                    1, rowBytes, pieceBytes, 0, 0, bases, false);
        }
        LayoutDetector.checkSpan(tensors, es);
        return layout;
    }
}
