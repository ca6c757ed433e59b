package io.lmcache.server.storage;

/**
 * Told when a published object leaves L1 (evicted, cleared, replaced): the KV-event log's feed. Called under the object store's
 * lock, so it may only copy the names; {@link #batchEnded} comes once per lock hold that removed anything, before the release.
 */
public interface RemovalListener {
    void removed(String model, ChunkHash hash);

    /**
     * The removed object in full (the fleet's delete events name salt, rank, group and size; {@code tagged}: its key has request
     * tags, which LMCache's key cannot name); by default {@link #removed(String, ChunkHash)}.
     */
    default void removed(String model, String salt, boolean tagged, int kvRank, int group, ChunkHash hash, long bytes) {
        removed(model, hash);
    }

    void batchEnded();
}
