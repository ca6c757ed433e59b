package io.lmcache.server.protocol;

/** What the two {@link TokenHashChain}s share: the root they were built with and the walk over chunks. */
abstract sealed class ChainBase permits Blake3Chain, Sha256CborChain {
    private final byte[] root;

    ChainBase(byte[] root) {
        if (root.length != TokenHashChain.HASH_BYTES) {
            throw new IllegalArgumentException("a root of " + root.length + " bytes");
        }
        this.root = root;
    }

    public final byte[] root() {
        return root.clone();
    }

    abstract void chunk(byte[] prefix, int prefixOffset, int[] tokens, int from, int to, byte[] out, int outOffset);

    public final void hashChunks(int[] tokens, int chunkSize, int fromChunk, int toChunk, byte[] hashes) {
        if (chunkSize < 1 || fromChunk < 0 || fromChunk > toChunk || (long) toChunk * chunkSize > tokens.length
                || (long) toChunk * TokenHashChain.HASH_BYTES > hashes.length) {
            throw new IllegalArgumentException("chunks [" + fromChunk + ", " + toChunk + ") of " + chunkSize + " tokens do not fit "
                    + tokens.length + " tokens and " + hashes.length + " hash bytes");
        }
        for (int chunk = fromChunk; chunk < toChunk; chunk++) {
            byte[] prefix = chunk == 0 ? root : hashes;
            int prefixOffset = chunk == 0 ? 0 : (chunk - 1) * TokenHashChain.HASH_BYTES;
            chunk(prefix, prefixOffset, tokens, chunk * chunkSize, (chunk + 1) * chunkSize, hashes, chunk * TokenHashChain.HASH_BYTES);
        }
    }
}
