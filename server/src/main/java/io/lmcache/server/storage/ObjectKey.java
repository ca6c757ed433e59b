package io.lmcache.server.storage;

/**
 * The identity of one stored object (protocol doc §8.1): namespace (model name and cache salt,
 * interned), kv rank, object group, and the 128-bit prefix-chained hash of the chunk. Request id
 * and reader count are not part of it.
 */
public record ObjectKey(int namespace, int kvRank, int group, long hashHi, long hashLo) {
    @Override
    public int hashCode() {
        // the chunk hash is already uniformly distributed
        return (int) (hashLo ^ (hashLo >>> 32)) ^ (31 * kvRank + namespace) ^ (group << 16);
    }
}
