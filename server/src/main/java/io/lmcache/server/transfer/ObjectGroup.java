package io.lmcache.server.transfer;

import java.util.List;

/**
 * One object group (hybrid-and-l2.md §A.4, §A.6): kernel groups stored together, one object per
 * (chunk, kv rank, object group). An object is the concatenation of one segment per kernel group,
 * in the group's order; segment {@code i} starts at {@code segmentOffsets[i]}:
 * <pre>
 *   [ kernel 0: plane | layer | kept block | piece ][ kernel 1: ... ] ...
 * </pre>
 *
 * @param windowChunks chunks a LOOKUP needs present up to the hit, -1 = every chunk (full attention)
 * @param format the layout identity of its objects: a reader of another layout treats them as missing
 */
public record ObjectGroup(int index, GroupKind kind, int windowChunks, List<KernelGroup> kernels, long[] segmentOffsets,
        long objectBytes, int format) {

    public boolean fullAttention() {
        return windowChunks < 0;
    }
}
