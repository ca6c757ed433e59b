package io.lmcache.server.storage;

/**
 * Told when a published object leaves L1 (evicted, cleared, replaced): the KV-event log's feed. Called under the object store's
 * lock, so it may only copy the names; {@link #batchEnded} comes once per lock hold that removed anything, before the release.
 */
public interface RemovalListener {
    void removed(String model, ChunkHash hash);

    void batchEnded();
}
