package io.lmcache.server.transfer;

import java.util.List;

/**
 * The validated shape of one transfer: its chunks, their hashes, and per object group the block
 * ids to copy. One stored object per (chunk, kv rank, object group): today every registration has
 * one object group, a hybrid model adds a part per group (hybrid-and-l2.md §A.3, §A.6).
 */
public record TransferPlan(ChunkRange range, ChunkHashes hashes, List<GroupPart> parts) {

    /**
     * One object group's share: its block ids (the worker's list for this group), how many blocks
     * make one chunk, and the size and format of its stored objects.
     */
    public record GroupPart(int objectGroup, int[] blockIds, int blocksPerChunk, long objectBytes, int format) {}

    /** Stored objects this plan touches: one per chunk and group, indexed {@code chunk * groups + group}. */
    public int objectCount() {
        return range.count() * parts.size();
    }

    /** The index of chunk {@code j} (counted from the first chunk of the range) and group part {@code g}. */
    public int objectIndex(int j, int g) {
        return j * parts.size() + g;
    }

    /** The absolute chunk number of the range's {@code j}-th chunk. */
    public int chunk(int j) {
        return range.firstChunk() + j;
    }
}
