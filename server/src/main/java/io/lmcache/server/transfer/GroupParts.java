package io.lmcache.server.transfer;

import java.util.ArrayList;
import java.util.List;

/**
 * The per-object-group parts of a transfer (hybrid-and-l2.md §A.3.3, §A.3.4): which chunks each
 * object group moves. The block lists were validated by {@link TransferPlanner} before.
 */
final class GroupParts {
    private GroupParts() {}

    static List<TransferPlan.GroupPart> of(CacheGeometry geometry, int chunks, int[][] blockIds, boolean store) {
        List<TransferPlan.GroupPart> parts = new ArrayList<>(geometry.objects().size());
        for (ObjectGroup group : geometry.objects()) {
            int[][] ids = new int[group.kernels().size()][];
            for (int i = 0; i < ids.length; i++) {
                ids[i] = blockIds[group.kernels().get(i).index()];
            }
            boolean[] skipped = store ? (geometry.hybrid() ? nullChunks(group, ids, chunks) : null) : outsideWindow(group, chunks);
            parts.add(new TransferPlan.GroupPart(group, ids, skipped));
        }
        return parts;
    }

    /**
     * STORE: chunks whose kept ids are all the null block in every kernel group of the object group
     * (how align-mode Mamba stores only real snapshots). Only kept ids count: a snapshot copied out
     * of the null block would be stored as if it were state.
     */
    static boolean[] nullChunks(ObjectGroup group, int[][] ids, int chunks) {
        boolean[] skipped = new boolean[chunks];
        boolean any = false;
        for (int j = 0; j < chunks; j++) {
            boolean allNull = true;
            for (int i = 0; i < ids.length && allNull; i++) {
                KernelGroup kernel = group.kernels().get(i);
                int from = j * kernel.blocksPerChunk() + kernel.firstKept();
                for (int b = from; b < from + kernel.blocksKept() && allNull; b++) {
                    allNull = ids[i][b] == 0;
                }
            }
            skipped[j] = allNull;
            any |= allNull;
        }
        return any ? skipped : null;
    }

    /** RETRIEVE: a windowed group reads only its last {@code w} chunks; an aux group none. */
    static boolean[] outsideWindow(ObjectGroup group, int chunks) {
        int read = group.kind() == GroupKind.AUX ? 0 : group.fullAttention() ? chunks : Math.min(chunks, group.windowChunks());
        if (read == chunks) {
            return null;
        }
        boolean[] skipped = new boolean[chunks];
        for (int j = 0; j < chunks - read; j++) {
            skipped[j] = true;
        }
        return skipped;
    }
}
