package io.lmcache.server.transfer;

import java.util.List;

/**
 * The validated shape of one transfer: its chunks, their hashes, and per object group the block
 * ids to copy. One stored object per (chunk, kv rank, object group); a non-hybrid registration has
 * one group (hybrid-and-l2.md §A.3, §A.6).
 */
public record TransferPlan(ChunkRange range, ChunkHashes hashes, List<GroupPart> parts) {

    /**
     * One object group's share: the block ids of each of its kernel groups (the worker's lists, in
     * the group's order) and which of the range's chunks it leaves out: a STORE the chunks whose
     * kept ids are all vLLM's null block, a RETRIEVE those outside the group's window.
     *
     * @param skipped per chunk of the range; null = none left out
     */
    public record GroupPart(ObjectGroup group, int[][] blockIds, boolean[] skipped) {
        public int objectGroup() {
            return group.index();
        }

        public long objectBytes() {
            return group.objectBytes();
        }

        public int format() {
            return group.format();
        }

        /** Whether the range's {@code j}-th chunk has an object of this group in the transfer. */
        public boolean moves(int j) {
            return skipped == null || !skipped[j];
        }
    }

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
