package io.lmcache.server.storage;

/**
 * The identity of one stored object inside the store: its {@link ChunkKey} with model name and cache
 * salt interned to a namespace id (ids are reused only after 2^31 namespaces, so a policy's ghost entry
 * keyed by it never names another tenant's chunk). Request id and reader count are not part of it.
 */
public record ObjectKey(int namespace, int kvRank, int group, ChunkHash hash) {
    @Override
    public int hashCode() {
        // the chunk hash is already uniformly distributed
        return hash.hashCode() ^ (31 * kvRank + namespace) ^ (group << 16);
    }
}
