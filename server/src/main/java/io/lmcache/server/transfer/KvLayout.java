package io.lmcache.server.transfer;

import io.lmcache.server.protocol.DType;

/**
 * How a worker's paged KV cache sits in memory, reduced to what copying needs. A "piece" is one
 * block of one layer and one plane (K, V, or the single plane of MLA/fused layouts); it is always
 * contiguous, {@code subBlocks} runs of {@code blockSize} token rows of {@code rowBytes} each
 * (HND: one run per head; NHD: one run of all heads).
 *
 * <p>A stored chunk object holds its pieces in the order {@code [plane][layer][block][piece]}; for
 * NHD layouts that is LMCache's {@code KV_2LTD} (token-major, K then V), the same bytes the
 * engine-driven path exchanges. The object's {@link #format()} says which order it is in, so a
 * reader in another layout treats it as a miss instead of misreading it.
 *
 * @param tensorBaseBytes per registered tensor, the byte offset of the view in its storage
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
        long[] tensorBaseBytes) {

    /** The vLLM layouts of protocol doc §6.4. */
    public enum Kind {
        FLASH_ATTENTION("FlashAttention [2, nb, bs, nh, hs]"),
        FLASH_INFER("FlashInfer [nb, 2, bs, nh, hs]"),
        FUSED("fused K/V [nb, bs, nh, 2*hs]"),
        MLA("MLA [nb, bs, hs]"),
        CROSS_LAYER("cross-layer [nb, nl, 2, bs, nh, hs]");

        private final String description;

        Kind(String description) {
            this.description = description;
        }

        public String description() {
            return description;
        }
    }

    /** Object formats; HND ones also carry the block size, since the bytes are tiled by it. */
    public static final int FORMAT_TOKEN_MAJOR_KV = 1;
    public static final int FORMAT_TOKEN_MAJOR_SINGLE = 2;
    public static final int FORMAT_HEAD_MAJOR_KV = 3;
    public static final int FORMAT_HEAD_MAJOR_SINGLE = 4;

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
        if (!hnd || subBlocks == 1) {
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

    /**
     * Whether a chunk's segment is LMCache's object layout, {@code KV_2LTD}: {@code [planes, layers, tokens, heads * head size]}
     * (protocol doc §6.4, {@code MemoryFormat.KV_2LTD}). Head-major blocks of several heads and fused K/V (K and V interleaved per
     * token) are copied as they are in the worker's blocks, so their bytes are in another order.
     */
    public boolean lmcacheObjectLayout() {
        return kind != Kind.FUSED && (!hnd || subBlocks == 1);
    }

    /**
     * The segment's full format as L2 records it: dtype, {@code [planes, layers, tokens, heads x head size]}, and the block
     * order when it is not LMCache's ({@code hnd<block size>}, {@code fused}). Two layouts of one size differ here.
     */
    public String segmentFormat(int blocks) {
        String shape = dtype.torchName() + "[" + planes + "," + numLayers + "," + blocks * blockSize + "," + numHeads + "x" + headSize + "]";
        if (kind == Kind.FUSED) {
            return shape + " fused" + (hnd && subBlocks > 1 ? " hnd" + blockSize : "");
        }
        return lmcacheObjectLayout() ? shape : shape + " hnd" + blockSize;
    }

    /** Bytes of {@code blocks} blocks of every layer and plane: a chunk's segment when {@code blocks} is its kept blocks. */
    public long segmentBytes(int blocks) {
        return (long) planes * numLayers * blocks * pieceBytes;
    }

    public int tensorIndex(int layer) {
        return crossLayer() ? 0 : layer;
    }

    /** Byte offset of the piece (layer, plane, block) in its tensor's storage. */
    public long pieceOffset(int layer, int plane, int block) {
        return tensorBaseBytes[tensorIndex(layer)] + (crossLayer() ? layer * layerStrideBytes : 0) + plane * planeStrideBytes
                + block * blockStrideBytes;
    }

    public String describe() {
        return kind.description() + (hnd ? " HND" : "") + ": " + numLayers + " layers, " + numBlocks + " blocks of " + blockSize
                + " tokens, " + numHeads + " heads x " + headSize + ", " + dtype.torchName() + ", " + pieceBytes + " B per block piece";
    }
}
