package io.lmcache.bench.hash;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * The server's {@code Blake3} and {@code Blake3Chain.chunk} as of commit 3a020d9, frozen for {@link HashCostMain}'s
 * same-run before/after: every chunk's prefix and tokens copied big-endian into a byte buffer, then hashed with a
 * compression whose seven rounds loop, the message permuted by renaming between rounds.
 */
final class Blake3Before {
    private static final VarHandle INT_BE = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.BIG_ENDIAN);
    private byte[] buffer = new byte[32 + 4 * 256];

    /** {@code Blake3Chain.chunk} as of 3a020d9. */
    void chunk(byte[] prefix, int prefixOffset, int[] tokens, int from, int to, byte[] result, int resultOffset) {
        int length = 32 + 4 * (to - from);
        if (buffer.length < length) {
            buffer = new byte[length];
        }
        System.arraycopy(prefix, prefixOffset, buffer, 0, 32);
        for (int t = from, at = 32; t < to; t++, at += 4) {
            INT_BE.set(buffer, at, tokens[t]);
        }
        hash(buffer, 0, length, result, resultOffset);
    }

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

    private final int[] block = new int[16];
    private final int[] cv = new int[8];
    private final int[] out = new int[16];
    private final int[] stack = new int[8 * MAX_DEPTH];

    /** Writes BLAKE3({@code in[offset, offset + length)}) to {@code result[resultOffset, resultOffset + 32)}. */
    void hash(byte[] in, int offset, int length, byte[] result, int resultOffset) {
        int depth = 0;
        long chunk = 0;
        int at = offset;
        int end = offset + length;
        // every chunk but the last is complete and has a successor: its chaining value joins the tree at once
        while (end - at > CHUNK) {
            chunkValue(in, at, CHUNK, chunk, 0);
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
        chunkValue(in, at, end - at, chunk, depth == 0 ? ROOT : 0);
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
    private void chunkValue(byte[] in, int at, int length, long counter, int rootFlag) {
        System.arraycopy(IV, 0, cv, 0, 8);
        int blocks = Math.max(1, (length + BLOCK - 1) / BLOCK);
        for (int b = 0; b < blocks; b++) {
            int from = at + b * BLOCK;
            int blockLength = Math.min(BLOCK, length - b * BLOCK);
            if (blockLength == BLOCK) {
                for (int w = 0; w < 16; w++) {
                    block[w] = (int) INT_LE.get(in, from + 4 * w);
                }
            } else {
                loadPartial(in, from, blockLength);
            }
            int flags = (b == 0 ? CHUNK_START : 0) | (b == blocks - 1 ? CHUNK_END | rootFlag : 0);
            // a root is the output's block 0: its counter is 0, which a lone chunk's counter is too
            compress(cv, block, counter, blockLength, flags);
            System.arraycopy(out, 0, cv, 0, 8);
        }
    }

    private void loadPartial(byte[] in, int from, int length) {
        Arrays.fill(block, 0);
        for (int i = 0; i < length; i++) {
            block[i >>> 2] |= (in[from + i] & 0xFF) << (8 * (i & 3));
        }
    }

    /** The parent of the chaining values at {@code stack[left]} and {@code stack[right]} into {@link #cv}. */
    private void parent(int left, int right, int rootFlag) {
        System.arraycopy(stack, left, block, 0, 8);
        System.arraycopy(stack, right, block, 8, 8);
        compress(IV, block, 0, BLOCK, PARENT | rootFlag);
        System.arraycopy(out, 0, cv, 0, 8);
    }

    /**
     * BLAKE3's compression function; the first eight output words (all a chaining value needs) go to {@link #out}. State and
     * message live in locals, one G per two lines, and the message is permuted by renaming between rounds: an array-indexed
     * schedule ran slower than BouncyCastle.
     */
    private void compress(int[] chaining, int[] m, long counter, int blockLength, int flags) {
        int v0 = chaining[0], v1 = chaining[1], v2 = chaining[2], v3 = chaining[3];
        int v4 = chaining[4], v5 = chaining[5], v6 = chaining[6], v7 = chaining[7];
        int v8 = IV[0], v9 = IV[1], v10 = IV[2], v11 = IV[3];
        int v12 = (int) counter, v13 = (int) (counter >>> 32), v14 = blockLength, v15 = flags;
        int m0 = m[0], m1 = m[1], m2 = m[2], m3 = m[3], m4 = m[4], m5 = m[5], m6 = m[6], m7 = m[7];
        int m8 = m[8], m9 = m[9], m10 = m[10], m11 = m[11], m12 = m[12], m13 = m[13], m14 = m[14], m15 = m[15];
        for (int round = 0; round < 7; round++) {
            // columns, then diagonals
            v0 += v4 + m0; v12 = Integer.rotateRight(v12 ^ v0, 16); v8 += v12; v4 = Integer.rotateRight(v4 ^ v8, 12);
            v0 += v4 + m1; v12 = Integer.rotateRight(v12 ^ v0, 8); v8 += v12; v4 = Integer.rotateRight(v4 ^ v8, 7);
            v1 += v5 + m2; v13 = Integer.rotateRight(v13 ^ v1, 16); v9 += v13; v5 = Integer.rotateRight(v5 ^ v9, 12);
            v1 += v5 + m3; v13 = Integer.rotateRight(v13 ^ v1, 8); v9 += v13; v5 = Integer.rotateRight(v5 ^ v9, 7);
            v2 += v6 + m4; v14 = Integer.rotateRight(v14 ^ v2, 16); v10 += v14; v6 = Integer.rotateRight(v6 ^ v10, 12);
            v2 += v6 + m5; v14 = Integer.rotateRight(v14 ^ v2, 8); v10 += v14; v6 = Integer.rotateRight(v6 ^ v10, 7);
            v3 += v7 + m6; v15 = Integer.rotateRight(v15 ^ v3, 16); v11 += v15; v7 = Integer.rotateRight(v7 ^ v11, 12);
            v3 += v7 + m7; v15 = Integer.rotateRight(v15 ^ v3, 8); v11 += v15; v7 = Integer.rotateRight(v7 ^ v11, 7);
            v0 += v5 + m8; v15 = Integer.rotateRight(v15 ^ v0, 16); v10 += v15; v5 = Integer.rotateRight(v5 ^ v10, 12);
            v0 += v5 + m9; v15 = Integer.rotateRight(v15 ^ v0, 8); v10 += v15; v5 = Integer.rotateRight(v5 ^ v10, 7);
            v1 += v6 + m10; v12 = Integer.rotateRight(v12 ^ v1, 16); v11 += v12; v6 = Integer.rotateRight(v6 ^ v11, 12);
            v1 += v6 + m11; v12 = Integer.rotateRight(v12 ^ v1, 8); v11 += v12; v6 = Integer.rotateRight(v6 ^ v11, 7);
            v2 += v7 + m12; v13 = Integer.rotateRight(v13 ^ v2, 16); v8 += v13; v7 = Integer.rotateRight(v7 ^ v8, 12);
            v2 += v7 + m13; v13 = Integer.rotateRight(v13 ^ v2, 8); v8 += v13; v7 = Integer.rotateRight(v7 ^ v8, 7);
            v3 += v4 + m14; v14 = Integer.rotateRight(v14 ^ v3, 16); v9 += v14; v4 = Integer.rotateRight(v4 ^ v9, 12);
            v3 += v4 + m15; v14 = Integer.rotateRight(v14 ^ v3, 8); v9 += v14; v4 = Integer.rotateRight(v4 ^ v9, 7);
            // BLAKE3's message permutation (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8): word i of the next round is word
            // permutation[i] of this one
            int t0 = m2, t1 = m6, t2 = m3, t3 = m10, t4 = m7, t5 = m0, t6 = m4, t7 = m13;
            int t8 = m1, t9 = m11, t10 = m12, t11 = m5, t12 = m9, t13 = m14, t14 = m15, t15 = m8;
            m0 = t0; m1 = t1; m2 = t2; m3 = t3; m4 = t4; m5 = t5; m6 = t6; m7 = t7;
            m8 = t8; m9 = t9; m10 = t10; m11 = t11; m12 = t12; m13 = t13; m14 = t14; m15 = t15;
        }
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
