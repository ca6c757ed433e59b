package io.lmcache.server.transfer;

import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.ChunkHasher;

/**
 * The prefix-chained hashes of a key's chunks: a flyweight over one {@code long[]} (two longs per
 * chunk, high then low), read per chunk with {@link #hi} and {@link #lo}. The static methods keep
 * the raw form for the lookup path, with one hasher per thread.
 */
public final class ChunkHashes {
    private static final ThreadLocal<ChunkHasher> HASHER = ThreadLocal.withInitial(ChunkHasher::new);

    private final long[] hashes;
    private final int endChunk;

    private ChunkHashes(long[] hashes, int endChunk) {
        this.hashes = hashes;
        this.endChunk = endChunk;
    }

    /** The hashes of chunks {@code 0..endChunk-1} of a key. */
    public static ChunkHashes hash(CacheKey key, int chunkSize, int endChunk) {
        return new ChunkHashes(of(key, chunkSize, endChunk), endChunk);
    }

    /** The high half of chunk {@code chunk}'s hash. */
    public long hi(int chunk) {
        return hashes[2 * chunk];
    }

    /** The low half of chunk {@code chunk}'s hash. */
    public long lo(int chunk) {
        return hashes[2 * chunk + 1];
    }

    /** The hashes themselves, two longs per chunk (high, low); shared, never to be written (the KV-event log reads parents here). */
    public long[] pairs() {
        return hashes;
    }

    /** Chunks hashed: {@code 0..endChunk-1}. */
    public int endChunk() {
        return endChunk;
    }

    /** Hashes of chunks {@code 0..endChunk-1} (two longs each). */
    public static long[] of(CacheKey key, int chunkSize, int endChunk) {
        long[] hashes = new long[2 * endChunk];
        HASHER.get().hashChunks(key.tokenIds(), chunkSize, endChunk, hashes);
        return hashes;
    }

    /** Adds the hashes of chunks {@code [fromChunk, toChunk)} to {@code hashes}, which holds those before them. */
    public static void extend(CacheKey key, int chunkSize, int fromChunk, int toChunk, long[] hashes) {
        HASHER.get().hashChunks(key.tokenIds(), chunkSize, fromChunk, toChunk, hashes);
    }
}
