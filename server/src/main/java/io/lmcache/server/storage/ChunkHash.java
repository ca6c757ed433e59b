package io.lmcache.server.storage;

/**
 * A chunk's prefix-chained hash, 256 bits wide (four longs, most significant first). Today's
 * hasher makes 128-bit hashes: they fill {@code w0} and {@code w1} and leave the rest zero, so
 * LMCache's 32-byte BLAKE3 hashes (issue 27) change only the hasher and {@link #PACKED_LONGS}.
 */
public record ChunkHash(long w0, long w1, long w2, long w3) {
    /** Longs per chunk in the packed arrays the hasher fills ({@code transfer.ChunkHashes}): two, high then low. */
    public static final int PACKED_LONGS = 2;

    /** A 128-bit hash: {@code hi} and {@code lo} as the hasher gives them. */
    public static ChunkHash of128(long hi, long lo) {
        return new ChunkHash(hi, lo, 0, 0);
    }

    /** Chunk {@code chunk}'s hash in a packed array of {@link #PACKED_LONGS} longs per chunk. */
    public static ChunkHash unpack(long[] packed, int chunk) {
        int at = PACKED_LONGS * chunk;
        return new ChunkHash(packed[at], packed[at + 1], 0, 0);
    }

    @Override
    public int hashCode() {
        // already uniformly distributed: one word is enough
        return (int) (w1 ^ (w1 >>> 32));
    }
}
