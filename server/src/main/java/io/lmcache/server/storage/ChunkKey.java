package io.lmcache.server.storage;

/**
 * The name of one chunk object at the store's API (protocol doc §8.1): model, cache salt (the
 * tenant), kv rank, object group and the chunk's hash. The store interns model and salt inside
 * ({@link ObjectKey}).
 */
public record ChunkKey(String model, String salt, int kvRank, int group, ChunkHash hash) {
    /** A key with a 128-bit hash ({@code hi}, {@code lo} as {@code transfer.ChunkHashes} gives them). */
    public static ChunkKey of(String model, String salt, int kvRank, int group, long hashHi, long hashLo) {
        return new ChunkKey(model, salt, kvRank, group, ChunkHash.of128(hashHi, hashLo));
    }
}
