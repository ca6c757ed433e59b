package io.lmcache.server.protocol;

/**
 * LMCache's chunk-hash chain ({@code lmcache/v1/multiprocess/token_hasher.py}, {@code TokenHasher}):
 * {@code h_0 = root}, {@code h_i = H(h_(i-1), tokens of chunk i)}, one 32-byte hash per complete
 * chunk, so a chunk's hash names the whole prefix up to its end. The two implementations are
 * LMCache's {@code blake3} and vLLM's {@code sha256_cbor}; equal tokens, chunk size, algorithm and
 * root give the same hashes as a Python LMCache server, which is what lets the two share an L2.
 *
 * <p>Hashes live in caller-owned {@code byte[]}s at 32-byte offsets, so the lookup path hashes
 * chunk by chunk without allocating. Not thread-safe (each instance keeps its digest and buffer):
 * one per thread, from {@link #blake3()} or {@link #sha256Cbor(String)}.
 */
public sealed interface TokenHashChain permits Blake3Chain, Sha256CborChain {
    /** Bytes of every hash, the root included. */
    int HASH_BYTES = 32;

    /** LMCache's {@code blake3} chain: its default. */
    static TokenHashChain blake3() {
        return new Blake3Chain();
    }

    /**
     * vLLM's {@code sha256_cbor} chain, rooted at {@code sha256_cbor(pythonHashSeed)}, the value of
     * {@code PYTHONHASHSEED} exactly as the Python processes of the fleet see it.
     */
    static TokenHashChain sha256Cbor(String pythonHashSeed) {
        return new Sha256CborChain(pythonHashSeed);
    }

    /** The {@code --hash-algorithm} name: {@code blake3} or {@code sha256_cbor}. */
    String name();

    /** A copy of the root, the prefix hash of chunk 0. */
    byte[] root();

    /**
     * Writes {@code H(prefix, tokens[from, to))} to {@code out[outOffset, outOffset + 32)}. The
     * prefix is read before the output is written, so the two may be the same bytes.
     *
     * @param prefix the previous chunk's hash (or the root) at {@code prefix[prefixOffset, prefixOffset + 32)}
     */
    void chunk(byte[] prefix, int prefixOffset, int[] tokens, int from, int to, byte[] out, int outOffset);

    /**
     * Hashes chunks {@code [fromChunk, toChunk)} of {@code tokens} into {@code hashes} (chunk
     * {@code c} at offset {@code 32 * c}), continuing the chain from chunk {@code fromChunk - 1},
     * which must already be there (from the root when {@code fromChunk} is 0). Only complete chunks
     * exist, as in LMCache; a lookup hashes only as far as the cache holds the prefix.
     */
    void hashChunks(int[] tokens, int chunkSize, int fromChunk, int toChunk, byte[] hashes);
}
