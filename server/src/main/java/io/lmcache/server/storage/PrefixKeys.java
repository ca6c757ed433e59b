package io.lmcache.server.storage;

import io.lmcache.server.protocol.RequestTags;

/**
 * The chunk keys of a prefix for a lookup: every kv rank {@code 0..worldSize-1} of object group
 * {@code group} under one model, salt and tag set, chunk {@code i}'s hash packed in {@code hashes}
 * ({@link ChunkHash#BYTES} bytes per chunk, as {@code transfer.ChunkHashes} fills them).
 */
public record PrefixKeys(String model, String salt, RequestTags tags, int worldSize, int group, byte[] hashes) {
    /** An untagged prefix whose chunk {@code i} has the made-up hash {@code (words[2i], words[2i + 1], 0, 0)}: for tests and benchmarks. */
    public static PrefixKeys ofWords(String model, String salt, int worldSize, int group, long... words) {
        byte[] hashes = new byte[ChunkHash.BYTES * (words.length / 2)];
        for (int i = 0; i < words.length / 2; i++) {
            new ChunkHash(words[2 * i], words[2 * i + 1], 0, 0).write(hashes, ChunkHash.BYTES * i);
        }
        return new PrefixKeys(model, salt, RequestTags.NONE, worldSize, group, hashes);
    }

    ChunkHash hash(int chunk) {
        return ChunkHash.unpack(hashes, chunk);
    }
}
