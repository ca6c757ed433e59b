package io.lmcache.server.protocol;

import java.nio.charset.StandardCharsets;
import java.security.DigestException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * vLLM's {@code sha256_cbor} chain ({@code vllm/utils/hashing.py}:
 * {@code sha256(cbor2.dumps(input, canonical=True))}), as LMCache's {@code TokenHasher} calls it: a
 * chunk's hash is the SHA-256 of the canonical CBOR of {@code (prefix hash, tuple(tokens), None)},
 * rooted where vLLM's {@code init_none_hash} roots it, {@code sha256_cbor(os.getenv("PYTHONHASHSEED"))}:
 * the seed as a CBOR text string.
 *
 * <p>The CBOR is written here byte by byte rather than through Jackson's CBOR generator: Jackson
 * promises no canonical form (jackson-dataformats-binary issue 138, open) and may write long
 * strings in indefinite-length chunks, while these three shapes need only RFC 8949 §4.2.1's rules,
 * which cbor2's {@code canonical=True} follows: a definite-length array of three items, the prefix
 * as a byte string (major type 2), each token as the shortest integer head (major type 0, or 1
 * for a negative token), {@code None} as {@code 0xf6}, every length in its shortest head. The tests
 * hold these bytes against cbor2's and Jackson's output.
 */
final class Sha256CborChain extends ChainBase implements TokenHashChain {
    private static final int MAJOR_UNSIGNED = 0;
    private static final int MAJOR_NEGATIVE = 1;
    private static final int MAJOR_BYTES = 2;
    private static final int MAJOR_TEXT = 3;
    private static final int MAJOR_ARRAY = 4;
    private static final byte ARRAY_OF_THREE = (byte) (MAJOR_ARRAY << 5 | 3);
    private static final byte NULL = (byte) 0xf6;
    /** The array, the byte string's head and bytes, the token array's longest head, and None. */
    private static final int FIXED_BYTES = 1 + 2 + HASH_BYTES + 5 + 1;
    private static final int MAX_INT_BYTES = 5;

    private final MessageDigest digest = sha256();
    private byte[] buffer = new byte[FIXED_BYTES + MAX_INT_BYTES * 256];

    Sha256CborChain(String pythonHashSeed) {
        super(rootHash(pythonHashSeed));
    }

    private static byte[] rootHash(String pythonHashSeed) {
        byte[] text = pythonHashSeed.getBytes(StandardCharsets.UTF_8);
        byte[] cbor = new byte[9 + text.length];
        int at = head(cbor, 0, MAJOR_TEXT, text.length);
        System.arraycopy(text, 0, cbor, at, text.length);
        MessageDigest digest = sha256();
        digest.update(cbor, 0, at + text.length);
        return digest.digest();
    }

    @Override
    public String name() {
        return "sha256_cbor";
    }

    @Override
    public void chunk(byte[] prefix, int prefixOffset, int[] tokens, int from, int to, byte[] out, int outOffset) {
        int bytes = FIXED_BYTES + MAX_INT_BYTES * (to - from);
        if (buffer.length < bytes) {
            buffer = new byte[bytes];
        }
        byte[] cbor = buffer;
        cbor[0] = ARRAY_OF_THREE;
        int at = head(cbor, 1, MAJOR_BYTES, HASH_BYTES);
        System.arraycopy(prefix, prefixOffset, cbor, at, HASH_BYTES);
        at = head(cbor, at + HASH_BYTES, MAJOR_ARRAY, to - from);
        for (int t = from; t < to; t++) {
            int token = tokens[t];
            // a negative integer n is major type 1 with argument -1 - n, which fits an int for every int n
            at = token >= 0 ? head(cbor, at, MAJOR_UNSIGNED, token) : head(cbor, at, MAJOR_NEGATIVE, -1L - token);
        }
        cbor[at++] = NULL;
        digest.update(cbor, 0, at);
        try {
            digest.digest(out, outOffset, HASH_BYTES);
        } catch (DigestException e) {
            throw new IllegalStateException("SHA-256 writes 32 bytes", e);
        }
    }

    /** Writes the shortest head of a major type and argument at {@code at}; returns the offset after it. */
    static int head(byte[] out, int at, int major, long argument) {
        int type = major << 5;
        if (argument < 24) {
            out[at] = (byte) (type | (int) argument);
            return at + 1;
        }
        if (argument < 1 << 8) {
            out[at] = (byte) (type | 24);
            out[at + 1] = (byte) argument;
            return at + 2;
        }
        if (argument < 1 << 16) {
            out[at] = (byte) (type | 25);
            out[at + 1] = (byte) (argument >>> 8);
            out[at + 2] = (byte) argument;
            return at + 3;
        }
        if (argument < 1L << 32) {
            out[at] = (byte) (type | 26);
            for (int i = 0; i < 4; i++) {
                out[at + 1 + i] = (byte) (argument >>> (24 - 8 * i));
            }
            return at + 5;
        }
        out[at] = (byte) (type | 27);
        for (int i = 0; i < 8; i++) {
            out[at + 1 + i] = (byte) (argument >>> (56 - 8 * i));
        }
        return at + 9;
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java runtime has SHA-256", e);
        }
    }
}
