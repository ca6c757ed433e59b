package io.lmcache.server.transfer;

import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.storage.StoreListener;

/**
 * What a store without a GPU plan committed (the HTTP KV bytes API, issue 49): chunks {@code 0..n-1} of {@code key}, whose hash
 * chain is {@code chain}, {@code objectsPerChunk} adjacent objects each ({@code objects[j * objectsPerChunk + w]}).
 */
public record ChunkStore(CacheKey key, byte[] chain, int objectsPerChunk) implements StoreListener.Origin {}
