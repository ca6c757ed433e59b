package io.lmcache.server.cuda;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;

/**
 * A head-major block piece ({@code [heads][block rows][row]}: vLLM's HND blocks, fused K/V HND blocks) that the object holds
 * token-major ({@code [block rows][heads][row]}), which is LMCache's object layout {@code KV_2LTD}: LMCache's GPU connector
 * gathers HND blocks by {@code permute(0, 2, 1, 3)} to {@code [tokens, heads * head size]} (LMCache/LMCache
 * {@code lmcache/v1/multiprocess/worker_transfer/base.py gather_paged_kv_to_cpu}, index id 55351424410) and its CUDA kernel maps a
 * token's scalar to {@code head * block size * head size + block offset * head size} ({@code page_buffer_offset}, formats
 * {@code NL_X_TWO_NB_NH_BS_HS}, {@code NL_X_NB_TWO_NH_BS_HS}, and {@code NL_X_NB_NH_BS_TWO_HS} with the packed
 * {@code 2 * head size} row; index id 57401739816).
 *
 * <p>A piece's shape travels in one 64-bit word beside its descriptor: bits 0–15 the heads, 16–31 the rows (tokens) of a
 * block, 32–47 the first row copied (a RETRIEVE's partly skipped block; then the piece is that one block), 48–63 the bytes of
 * a row. 0 is a plain piece. A piece is one block or a run of adjacent blocks; its tensor offset is its first block's start,
 * its object offset the first byte it copies there, its length the bytes it copies (the same on both sides). The object
 * side is then contiguous in row order; {@link #tensorRowOffset} is where each of its rows sits in the tensor, the mapping
 * {@code copy_pieces_kv2ltd} in {@code copy_pieces.cu} computes per thread (tested against the definition here, in CI).
 */
public final class HeadTranspose {
    /** The gather/scatter kernel's entry point for pieces with a shape; the PTX of an older build lacks it. */
    public static final String KERNEL = "copy_pieces_kv2ltd";
    /** The most a shape field holds. */
    public static final int MAX_FIELD = 0xFFFF;

    private static final boolean IN_PTX = ptxHasKernel(readPtx());

    private HeadTranspose() {}

    /** The shape word; throws when a field does not fit (the layout detector checks {@link #fits} first). */
    public static long shape(int heads, int blockRows, int firstRow, long rowBytes) {
        if (!fits(heads, blockRows, rowBytes) || firstRow < 0 || firstRow >= blockRows) {
            throw new IllegalArgumentException("head-major block " + heads + " heads x " + blockRows + " rows x " + rowBytes
                    + " B (from row " + firstRow + ") does not fit a piece shape");
        }
        return heads | (long) blockRows << 16 | (long) firstRow << 32 | rowBytes << 48;
    }

    /** Whether blocks of this shape can be transposed (every field fits 16 bits). */
    public static boolean fits(int heads, int blockRows, long rowBytes) {
        return heads > 0 && heads <= MAX_FIELD && blockRows > 0 && blockRows <= MAX_FIELD && rowBytes > 0 && rowBytes <= MAX_FIELD;
    }

    public static int heads(long shape) {
        return (int) (shape & MAX_FIELD);
    }

    public static int blockRows(long shape) {
        return (int) (shape >>> 16 & MAX_FIELD);
    }

    public static int firstRow(long shape) {
        return (int) (shape >>> 32 & MAX_FIELD);
    }

    public static int rowBytes(long shape) {
        return (int) (shape >>> 48 & MAX_FIELD);
    }

    /** Bytes of one whole block of this shape. */
    public static long blockBytes(long shape) {
        return (long) heads(shape) * blockRows(shape) * rowBytes(shape);
    }

    /**
     * Where row {@code row} of the piece's object side (its {@code row * rowBytes}-th byte) sits in the tensor, from the
     * piece's tensor offset: object rows run block by block, token by token (from the first row copied), head by head.
     * The kernel's mapping, word for word.
     */
    public static long tensorRowOffset(long shape, long row) {
        long heads = heads(shape);
        long rows = blockRows(shape);
        long first = firstRow(shape);
        long rowBytes = rowBytes(shape);
        long kept = rows - first;
        long perBlock = heads * kept;
        long block = row / perBlock;
        long within = row % perBlock;
        long token = within / heads;
        long head = within % heads;
        return (block * heads * rows + head * rows + first + token) * rowBytes;
    }

    /** Whether the PTX the copy engine loads has {@link #KERNEL} (false: head-major layouts keep their block order, named apart). */
    public static boolean kernelInPtx() {
        return IN_PTX;
    }

    /** Whether PTX text declares the kernel's entry point. */
    static boolean ptxHasKernel(String ptx) {
        return ptx.contains(".entry " + KERNEL + "(");
    }

    /** The committed PTX's text, "" when the jar has none (the copy engine then fails at its load, with the reason). */
    static String readPtx() {
        try (InputStream in = HeadTranspose.class.getResourceAsStream("copy_pieces.ptx")) {
            return in == null ? "" : new String(in.readAllBytes(), StandardCharsets.US_ASCII);
        } catch (IOException e) {
            return "";
        }
    }
}
