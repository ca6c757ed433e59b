package io.lmcache.server.transfer;

import io.lmcache.server.cuda.HeadTranspose;
import io.lmcache.server.protocol.DType;

/**
 * How a worker's paged KV cache sits in memory, reduced to what copying needs. A "piece" is one
 * block of one layer and one plane (K, V, or the single plane of MLA/fused layouts); it is always
 * contiguous, {@code subBlocks} runs of {@code blockSize} token rows of {@code rowBytes} each
 * (HND: one run per head; NHD: one run of all heads).
 *
 * <p>A stored chunk object holds its pieces in the order {@code [plane][layer][block][piece]}, each piece token-major: that
 * is LMCache's object layout {@code KV_2LTD} ({@code [planes, layers, tokens, heads x head size]}, K then V), the bytes the
 * engine-driven path and a Python LMCache server exchange. NHD pieces are token-major already; head-major (HND) blocks of
 * several heads are transposed as they are copied ({@link #transposes}), as LMCache's GPU connector does. Fused K/V
 * ({@code [nb, bs, nh, 2*hs]}) is one plane whose token rows hold each head's K then V: LMCache's spec for it
 * ({@code NL_X_NB_BS_NH_TWO_HS_Spec}: {@code kv_size} 1, head size {@code 2 * hs}; index id 60108452945) stores those rows
 * as they are, so its objects are {@code [1, layers, tokens, heads x 2 hs]}.
 *
 * @param tensorBaseBytes per registered tensor, the byte offset of the view in its storage
 * @param blockOrder head-major blocks are copied in their block order, not transposed: only where the copy path cannot
 *     transpose (a GPU whose loaded PTX lacks the transposing kernel); such objects are not LMCache's and are named apart
 */
public record KvLayout(
        Kind kind,
        boolean hnd,
        int numLayers,
        int numBlocks,
        int blockSize,
        int numHeads,
        int headSize,
        int planes,
        DType dtype,
        long pieceBytes,
        int subBlocks,
        long rowBytes,
        long blockStrideBytes,
        long planeStrideBytes,
        long layerStrideBytes,
        long[] tensorBaseBytes,
        boolean blockOrder) {

    /** The vLLM layouts of protocol doc §6.4, and SGLang's (docs/sglang.md). */
    public enum Kind {
        FLASH_ATTENTION("FlashAttention [2, nb, bs, nh, hs]"),
        FLASH_INFER("FlashInfer [nb, 2, bs, nh, hs]"),
        FUSED("fused K/V [nb, bs, nh, 2*hs]"),
        MLA("MLA [nb, bs, hs]"),
        CROSS_LAYER("cross-layer [nb, nl, 2, bs, nh, hs]"),
        /** SGLang's K pools then V pools, one tensor each ({@link SglangLayouts}): K of layer l is tensor l, V tensor nl + l. */
        SGLANG_MHA("SGLang MHA [K_0..K_nl-1, V_0..V_nl-1] x [nb*bs, nh, hs]"),
        /** SGLang's MLA pools, one tensor per layer ({@link SglangLayouts}). */
        SGLANG_MLA("SGLang MLA [nb*bs, 1, hs]");

        private final String description;

        Kind(String description) {
            this.description = description;
        }

        public String description() {
            return description;
        }
    }

    /** Object formats; head-major ones (the block-order fallback) also carry the block size, since the bytes are tiled by it. */
    public static final int FORMAT_TOKEN_MAJOR_KV = 1;
    public static final int FORMAT_TOKEN_MAJOR_SINGLE = 2;
    public static final int FORMAT_HEAD_MAJOR_KV = 3;
    public static final int FORMAT_HEAD_MAJOR_SINGLE = 4;

    /** SGLang's pools: page {@link SglangLayouts#NULL_PAGE} is its padding page, never copied to or from. */
    public boolean sglang() {
        return kind == Kind.SGLANG_MHA || kind == Kind.SGLANG_MLA;
    }

    public boolean crossLayer() {
        return kind == Kind.CROSS_LAYER;
    }

    public int blocksPerChunk(int chunkSize) {
        return chunkSize / blockSize;
    }

    public long objectBytes(int chunkSize) {
        return segmentBytes(blocksPerChunk(chunkSize));
    }

    /** Bytes of KV per token per worker (LMCache's {@code cache_size_per_token}). */
    public long bytesPerToken() {
        return (long) planes * numLayers * pieceBytes / blockSize;
    }

    /**
     * The object format: piece order, and the dtype, so that caches of different dtypes never mix
     * (an fp8 cache and a bf16 one with half the heads have objects of one size).
     */
    public int format() {
        if (lmcacheObjectLayout()) {
            return tokenMajorFormat(planes, dtype);
        }
        return (planes == 2 ? FORMAT_HEAD_MAJOR_KV : FORMAT_HEAD_MAJOR_SINGLE) | ((blockSize & 0xFFFF) << 8) | dtypeBits(dtype);
    }

    /** The format of token-major objects ({@code KV_2LTD}), which the engine-driven path exchanges too. */
    public static int tokenMajorFormat(int planes, DType dtype) {
        return (planes == 2 ? FORMAT_TOKEN_MAJOR_KV : FORMAT_TOKEN_MAJOR_SINGLE) | dtypeBits(dtype);
    }

    private static int dtypeBits(DType dtype) {
        return (dtype.ordinal() + 1) << 24;
    }

    /** Whether a block is head-major with several heads ({@code [heads][block rows][row]}): its rows are not token order. */
    public boolean headMajorBlocks() {
        return hnd && subBlocks > 1;
    }

    /** Whether pieces are transposed into token-major order as they are copied (head-major blocks, unless {@link #blockOrder}). */
    public boolean transposes() {
        return headMajorBlocks() && !blockOrder;
    }

    /**
     * Whether a chunk's segment is LMCache's object layout, {@code KV_2LTD}: {@code [planes, layers, tokens, heads * head size]}
     * (protocol doc §6.4, {@code MemoryFormat.KV_2LTD}). Every layout is, except head-major blocks in the block-order fallback.
     */
    public boolean lmcacheObjectLayout() {
        return !headMajorBlocks() || !blockOrder;
    }

    /** This layout with head-major blocks copied in their block order (the fallback of a copy path that cannot transpose). */
    public KvLayout withBlockOrder() {
        return new KvLayout(kind, hnd, numLayers, numBlocks, blockSize, numHeads, headSize, planes, dtype, pieceBytes, subBlocks, rowBytes,
                blockStrideBytes, planeStrideBytes, layerStrideBytes, tensorBaseBytes, true);
    }

    /** The {@link HeadTranspose} shape of a transposed piece whose rows before {@code firstRow} are left out (0: whole blocks). */
    public long transposeShape(int firstRow) {
        return HeadTranspose.shape(subBlocks, blockSize, firstRow, rowBytes);
    }

    /**
     * The segment's full format as L2 records it: dtype, {@code [planes, layers, tokens, heads x head size]}, {@code fused} for
     * fused K/V (one plane of packed K/V rows: not the bytes of an MLA layout of that size), and {@code hnd<block size>} for the
     * block-order fallback. Layouts whose bytes are equal (HND and NHD) have one format; two layouts of one size that differ
     * differ here.
     */
    public String segmentFormat(int blocks) {
        String shape = dtype.torchName() + "[" + planes + "," + numLayers + "," + blocks * blockSize + "," + numHeads + "x" + headSize + "]";
        return shape + (kind == Kind.FUSED ? " fused" : "") + (lmcacheObjectLayout() ? "" : " hnd" + blockSize);
    }

    /** Bytes of {@code blocks} blocks of every layer and plane: a chunk's segment when {@code blocks} is its kept blocks. */
    public long segmentBytes(int blocks) {
        return (long) planes * numLayers * blocks * pieceBytes;
    }

    public int tensorIndex(int layer) {
        return crossLayer() ? 0 : layer;
    }

    /** The tensor that holds {@code plane} of {@code layer}: SGLang keeps K and V in tensors of their own. */
    public int tensorIndex(int layer, int plane) {
        return kind == Kind.SGLANG_MHA ? plane * numLayers + layer : tensorIndex(layer);
    }

    /** Byte offset of the piece (layer, plane, block) in its tensor's storage. */
    public long pieceOffset(int layer, int plane, int block) {
        return tensorBaseBytes[tensorIndex(layer, plane)] + (crossLayer() ? layer * layerStrideBytes : 0) + plane * planeStrideBytes
                + block * blockStrideBytes;
    }

    public String describe() {
        return kind.description() + (hnd ? " HND" : "") + ": " + numLayers + " layers, " + numBlocks + " blocks of " + blockSize
                + " tokens, " + numHeads + " heads x " + headSize + ", " + dtype.torchName() + ", " + pieceBytes + " B per block piece";
    }
}
