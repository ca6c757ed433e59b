package io.lmcache.server.transfer;

import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.storage.StoreListener;

/**
 * What a store without a GPU plan committed (the HTTP KV bytes API, issue 49): chunks {@code firstChunk..firstChunk+n-1} of
 * {@code key}, whose hash chain is {@code chain}, {@code objectsPerChunk} adjacent objects each
 * ({@code objects[j * objectsPerChunk + w]} is of chunk {@code firstChunk + j}; the stream revision commits a chunk at a time).
 */
public record ChunkStore(CacheKey key, byte[] chain, int objectsPerChunk, int firstChunk) implements StoreListener.Origin {
    /** Chunks from the first. */
    public ChunkStore(CacheKey key, byte[] chain, int objectsPerChunk) {
        this(key, chain, objectsPerChunk, 0);
    }
}
