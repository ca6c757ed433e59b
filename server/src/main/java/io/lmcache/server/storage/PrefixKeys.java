package io.lmcache.server.storage;

/**
 * The chunk keys of a prefix for a lookup: every kv rank {@code 0..worldSize-1} of object group
 * {@code group}, chunk {@code i}'s hash packed in {@code hashes} as {@link ChunkHash#unpack} reads it.
 */
public record PrefixKeys(String model, String salt, int worldSize, int group, long[] hashes) {
    ChunkHash hash(int chunk) {
        return ChunkHash.unpack(hashes, chunk);
    }
}
