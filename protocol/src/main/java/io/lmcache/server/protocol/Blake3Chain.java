package io.lmcache.server.protocol;

/**
 * LMCache's {@code blake3} chain ({@code _make_blake3_hash_func} in {@code token_hasher.py}): a
 * chunk's hash is {@code BLAKE3(prefix hash ‖ each token as a big-endian uint32)}, 32 bytes. The
 * root is {@code hash_func((0, (0,), None))}: the int prefix 0 as 8 big-endian signed bytes and
 * the one token 0, so BLAKE3 of twelve zero bytes. A token is encoded by its 32 bits; Python's
 * {@code struct.pack(">I")} refuses a negative one, so such a chunk has no LMCache counterpart. BLAKE3 itself is
 * {@link Blake3}, fed the prefix and the tokens' words directly (no byte buffer): a 256-token chunk and its prefix are
 * 1 056 bytes, two BLAKE3 chunks and their parent, 18 compressions.
 */
final class Blake3Chain extends ChainBase implements TokenHashChain {
    private static final int ROOT_INPUT_BYTES = Long.BYTES + Integer.BYTES;
    /**
     * Hashed once per JVM, not once per chain (one per hashing thread): BLAKE3 of bytes runs branches the token path never
     * takes, and a new thread's chain hashing its root after the JIT compiled the token path sent the compiled hash back to
     * the interpreter at a fresh server's first requests (issue 52). Read only: {@link ChainBase} hands out copies.
     */
    private static final byte[] ROOT = rootHash();

    private final Blake3 blake3 = new Blake3();

    Blake3Chain() {
        super(ROOT);
    }

    private static byte[] rootHash() {
        byte[] root = new byte[HASH_BYTES];
        new Blake3().hash(new byte[ROOT_INPUT_BYTES], 0, ROOT_INPUT_BYTES, root, 0);
        return root;
    }

    @Override
    public String name() {
        return "blake3";
    }

    @Override
    public void chunk(byte[] prefix, int prefixOffset, int[] tokens, int from, int to, byte[] out, int outOffset) {
        blake3.hashPrefixedTokens(prefix, prefixOffset, tokens, from, to, out, outOffset);
    }
}
