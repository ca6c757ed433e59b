package io.lmcache.server.transfer;

import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.ChunkHasher;

/** The prefix-chained hashes of a key's chunks, with one hasher per thread. */
public final class ChunkHashes {
    private static final ThreadLocal<ChunkHasher> HASHER = ThreadLocal.withInitial(ChunkHasher::new);

    private ChunkHashes() {}

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
