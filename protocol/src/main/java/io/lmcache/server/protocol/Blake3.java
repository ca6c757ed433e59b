package io.lmcache.server.protocol;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * BLAKE3's default 32-byte hash (the BLAKE3 paper and reference implementation, BLAKE3-team/BLAKE3
 * {@code reference_impl/reference_impl.rs}): 1024-byte chunks of 64-byte blocks, each chunk's chaining value from
 * its blocks, the chunks joined by parent nodes into a binary tree whose left subtrees are complete powers of two,
 * the root compressed with the ROOT flag. Unkeyed, no extended output, so exactly what LMCache's {@code blake3.blake3(data).digest()}
 * gives. Checked against BLAKE3's published test vectors ({@code hashing/blake3-published-vectors.txt}).
 *
 * <p>Two inputs: bytes ({@link #hash}), and LMCache's chain input, a 32-byte prefix followed by tokens as big-endian
 * uint32 ({@link #hashPrefixedTokens}), read straight from the {@code int[]} the decoder filled: the prefix is eight
 * little-endian message words and every token one more, its bytes swapped, so no byte buffer is written. Written here
 * because BouncyCastle's {@code Blake3Digest} cost 4.4 times the old SHA-256 hash per 256-token chunk
 * (bench/RESULTS.md#lookup-path). Not thread-safe (scratch arrays): one instance per thread.
 */
final class Blake3 {
    static final int OUT_BYTES = 32;
    private static final int BLOCK = 64;
    private static final int CHUNK = 1024;
    private static final int CHUNK_START = 1;
    private static final int CHUNK_END = 2;
    private static final int PARENT = 4;
    private static final int ROOT = 8;
    private static final int[] IV = {0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19};
    private static final VarHandle INT_LE = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
    /** Chaining values of complete subtrees: at most 54 for inputs below 2^64 bytes; ours are far smaller. */
    private static final int MAX_DEPTH = 54;
    private static final int PREFIX_WORDS = OUT_BYTES / Integer.BYTES;

    private final int[] block = new int[16];
    private final int[] cv = new int[8];
    private final int[] stack = new int[8 * MAX_DEPTH];
    /** The input of the hash under way: bytes, or (when {@link #tokens} is set) a prefix and tokens. */
    private byte[] bytes;
    private int bytesOffset;
    private int[] tokens;
    private int tokensFrom;

    /** Writes BLAKE3({@code in[offset, offset + length)}) to {@code result[resultOffset, resultOffset + 32)}. */
    void hash(byte[] in, int offset, int length, byte[] result, int resultOffset) {
        bytes = in;
        bytesOffset = offset;
        tokens = null;
        tree(length, result, resultOffset);
        bytes = null;
    }

    /**
     * Writes BLAKE3({@code prefix[prefixOffset, prefixOffset + 32)} ‖ {@code tokens[from, to)} as big-endian uint32) to
     * {@code result[resultOffset, resultOffset + 32)}; the prefix is read before the result is written, so the two may
     * overlap.
     */
    void hashPrefixedTokens(byte[] prefix, int prefixOffset, int[] tokenIds, int from, int to, byte[] result, int resultOffset) {
        bytes = prefix;
        bytesOffset = prefixOffset;
        tokens = tokenIds;
        tokensFrom = from;
        tree(OUT_BYTES + Integer.BYTES * (to - from), result, resultOffset);
        bytes = null;
        tokens = null;
    }

    private void tree(int length, byte[] result, int resultOffset) {
        int depth = 0;
        long chunk = 0;
        int at = 0;
        // every chunk but the last is complete and has a successor: its chaining value joins the tree at once
        while (length - at > CHUNK) {
            chunkValue(at, CHUNK, chunk, 0);
            chunk++;
            System.arraycopy(cv, 0, stack, 8 * depth++, 8);
            for (long done = chunk; (done & 1) == 0; done >>>= 1) {
                depth--;
                parent(8 * (depth - 1), 8 * depth, 0);
                System.arraycopy(cv, 0, stack, 8 * (depth - 1), 8);
            }
            at += CHUNK;
        }
        // the last chunk: the root when it is alone, else the right edge of every parent on the stack
        chunkValue(at, length - at, chunk, depth == 0 ? ROOT : 0);
        while (depth > 0) {
            System.arraycopy(cv, 0, stack, 8 * depth, 8);
            depth--;
            parent(8 * depth, 8 * (depth + 1), depth == 0 ? ROOT : 0);
        }
        for (int i = 0; i < 8; i++) {
            INT_LE.set(result, resultOffset + 4 * i, cv[i]);
        }
    }

    /** One chunk's chaining value into {@link #cv}; {@code rootFlag} is ROOT on its last block when the chunk is the whole input. */
    private void chunkValue(int at, int length, long counter, int rootFlag) {
        System.arraycopy(IV, 0, cv, 0, 8);
        int blocks = Math.max(1, (length + BLOCK - 1) / BLOCK);
        for (int b = 0; b < blocks; b++) {
            int blockLength = Math.min(BLOCK, length - b * BLOCK);
            if (tokens != null) {
                loadTokens(at + b * BLOCK, blockLength);
            } else if (blockLength == BLOCK) {
                for (int w = 0; w < 16; w++) {
                    block[w] = (int) INT_LE.get(bytes, bytesOffset + at + b * BLOCK + 4 * w);
                }
            } else {
                loadPartial(bytesOffset + at + b * BLOCK, blockLength);
            }
            int flags = (b == 0 ? CHUNK_START : 0) | (b == blocks - 1 ? CHUNK_END | rootFlag : 0);
            // a root is the output's block 0: its counter is 0, which a lone chunk's counter is too
            compress(cv, counter, blockLength, flags);
        }
    }

    /**
     * The block at input byte {@code at} of a prefix-and-tokens input, whose length is a whole number of words: word
     * {@code w} of the input is the prefix's word {@code w} for {@code w < 8}, else token {@code w - 8} byte-swapped (its
     * big-endian bytes read little-endian); the words past the end are zero.
     */
    private void loadTokens(int at, int blockLength) {
        int word = at / Integer.BYTES;
        int words = blockLength / Integer.BYTES;
        int w = 0;
        for (; w < words && word + w < PREFIX_WORDS; w++) {
            block[w] = (int) INT_LE.get(bytes, bytesOffset + Integer.BYTES * (word + w));
        }
        int token = tokensFrom + word + w - PREFIX_WORDS;
        for (; w < words; w++) {
            block[w] = Integer.reverseBytes(tokens[token++]);
        }
        for (; w < 16; w++) {
            block[w] = 0;
        }
    }

    private void loadPartial(int from, int length) {
        Arrays.fill(block, 0);
        for (int i = 0; i < length; i++) {
            block[i >>> 2] |= (bytes[from + i] & 0xFF) << (8 * (i & 3));
        }
    }

    /** The parent of the chaining values at {@code stack[left]} and {@code stack[right]} into {@link #cv}. */
    private void parent(int left, int right, int rootFlag) {
        System.arraycopy(stack, left, block, 0, 8);
        System.arraycopy(stack, right, block, 8, 8);
        compress(IV, 0, BLOCK, PARENT | rootFlag);
    }

    /**
     * BLAKE3's compression function of {@code chaining} and {@link #block}; the first eight output words (all a chaining
     * value needs) go to {@link #cv} ({@code chaining} may be {@code cv}). State and message live in locals, one G per two
     * lines, the message permuted by renaming between rounds. The rotations are written as shifts, not
     * {@code Integer.rotateRight}: C2 turns either into one rotate, but C1's profiled code (what runs until C2 has compiled
     * this, seconds after start on a busy machine) counts every inlined call, 448 a compression, which made it about
     * twice as slow (bench/RESULTS.md#lookup-path). The loop, not unrolled rounds: as fast once compiled, and its back edges bring C2 sooner.
     */
    private void compress(int[] chaining, long counter, int blockLength, int flags) {
        int[] m = block;
        int v0 = chaining[0], v1 = chaining[1], v2 = chaining[2], v3 = chaining[3];
        int v4 = chaining[4], v5 = chaining[5], v6 = chaining[6], v7 = chaining[7];
        int v8 = IV[0], v9 = IV[1], v10 = IV[2], v11 = IV[3];
        int v12 = (int) counter, v13 = (int) (counter >>> 32), v14 = blockLength, v15 = flags;
        int m0 = m[0], m1 = m[1], m2 = m[2], m3 = m[3], m4 = m[4], m5 = m[5], m6 = m[6], m7 = m[7];
        int m8 = m[8], m9 = m[9], m10 = m[10], m11 = m[11], m12 = m[12], m13 = m[13], m14 = m[14], m15 = m[15];
        for (int round = 0; round < 7; round++) {
            // columns, then diagonals
            v0 += v4 + m0; v12 ^= v0; v12 = v12 >>> 16 | v12 << 16; v8 += v12; v4 ^= v8; v4 = v4 >>> 12 | v4 << 20;
            v0 += v4 + m1; v12 ^= v0; v12 = v12 >>> 8 | v12 << 24; v8 += v12; v4 ^= v8; v4 = v4 >>> 7 | v4 << 25;
            v1 += v5 + m2; v13 ^= v1; v13 = v13 >>> 16 | v13 << 16; v9 += v13; v5 ^= v9; v5 = v5 >>> 12 | v5 << 20;
            v1 += v5 + m3; v13 ^= v1; v13 = v13 >>> 8 | v13 << 24; v9 += v13; v5 ^= v9; v5 = v5 >>> 7 | v5 << 25;
            v2 += v6 + m4; v14 ^= v2; v14 = v14 >>> 16 | v14 << 16; v10 += v14; v6 ^= v10; v6 = v6 >>> 12 | v6 << 20;
            v2 += v6 + m5; v14 ^= v2; v14 = v14 >>> 8 | v14 << 24; v10 += v14; v6 ^= v10; v6 = v6 >>> 7 | v6 << 25;
            v3 += v7 + m6; v15 ^= v3; v15 = v15 >>> 16 | v15 << 16; v11 += v15; v7 ^= v11; v7 = v7 >>> 12 | v7 << 20;
            v3 += v7 + m7; v15 ^= v3; v15 = v15 >>> 8 | v15 << 24; v11 += v15; v7 ^= v11; v7 = v7 >>> 7 | v7 << 25;
            v0 += v5 + m8; v15 ^= v0; v15 = v15 >>> 16 | v15 << 16; v10 += v15; v5 ^= v10; v5 = v5 >>> 12 | v5 << 20;
            v0 += v5 + m9; v15 ^= v0; v15 = v15 >>> 8 | v15 << 24; v10 += v15; v5 ^= v10; v5 = v5 >>> 7 | v5 << 25;
            v1 += v6 + m10; v12 ^= v1; v12 = v12 >>> 16 | v12 << 16; v11 += v12; v6 ^= v11; v6 = v6 >>> 12 | v6 << 20;
            v1 += v6 + m11; v12 ^= v1; v12 = v12 >>> 8 | v12 << 24; v11 += v12; v6 ^= v11; v6 = v6 >>> 7 | v6 << 25;
            v2 += v7 + m12; v13 ^= v2; v13 = v13 >>> 16 | v13 << 16; v8 += v13; v7 ^= v8; v7 = v7 >>> 12 | v7 << 20;
            v2 += v7 + m13; v13 ^= v2; v13 = v13 >>> 8 | v13 << 24; v8 += v13; v7 ^= v8; v7 = v7 >>> 7 | v7 << 25;
            v3 += v4 + m14; v14 ^= v3; v14 = v14 >>> 16 | v14 << 16; v9 += v14; v4 ^= v9; v4 = v4 >>> 12 | v4 << 20;
            v3 += v4 + m15; v14 ^= v3; v14 = v14 >>> 8 | v14 << 24; v9 += v14; v4 ^= v9; v4 = v4 >>> 7 | v4 << 25;
            // BLAKE3's message permutation (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8): word i of the next round is word
            // permutation[i] of this one
            int t0 = m2, t1 = m6, t2 = m3, t3 = m10, t4 = m7, t5 = m0, t6 = m4, t7 = m13;
            int t8 = m1, t9 = m11, t10 = m12, t11 = m5, t12 = m9, t13 = m14, t14 = m15, t15 = m8;
            m0 = t0; m1 = t1; m2 = t2; m3 = t3; m4 = t4; m5 = t5; m6 = t6; m7 = t7;
            m8 = t8; m9 = t9; m10 = t10; m11 = t11; m12 = t12; m13 = t13; m14 = t14; m15 = t15;
        }
        int[] out = cv;
        out[0] = v0 ^ v8;
        out[1] = v1 ^ v9;
        out[2] = v2 ^ v10;
        out[3] = v3 ^ v11;
        out[4] = v4 ^ v12;
        out[5] = v5 ^ v13;
        out[6] = v6 ^ v14;
        out[7] = v7 ^ v15;
    }
}
