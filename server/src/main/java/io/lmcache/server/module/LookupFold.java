package io.lmcache.server.module;

import io.lmcache.server.transfer.GroupKind;
import io.lmcache.server.transfer.LookupGeometry;

/**
 * The window-aware hit of a LOOKUP across object groups (hybrid-and-l2.md §A.5): the largest
 * prefix L (in chunks) that every object group can serve. A full-attention group needs chunks
 * {@code [0, L)}, a group with a window of {@code w} chunks only {@code [L - w, L)}; an aux group
 * constrains nothing. Pure functions over presence bitmaps, one per object group.
 */
public final class LookupFold {
    private LookupFold() {}

    /** @param present per object group, whether chunk {@code c} of {@code [0, chunks)} is stored for every kv rank */
    public static int largestPrefix(LookupGeometry geometry, boolean[][] present, int chunks) {
        int limit = chunks;
        for (int g = 0; g < geometry.groups(); g++) {
            if (geometry.kinds()[g] != GroupKind.AUX && geometry.windowChunks()[g] < 0) {
                limit = Math.min(limit, leading(present[g], chunks));
            }
        }
        for (int hit = limit; hit > 0; hit--) {
            if (windowsServe(geometry, present, hit)) {
                return hit;
            }
        }
        return 0;
    }

    /** The first chunk of group {@code g} a hit of {@code hit} chunks keeps (and locks): 0, or the window's start. */
    public static int firstKept(LookupGeometry geometry, int g, int hit) {
        int window = geometry.windowChunks()[g];
        return window < 0 ? 0 : Math.max(0, hit - window);
    }

    /** Whether a group's chunks are kept at all: aux groups are never read by a standard retrieve. */
    public static boolean keeps(LookupGeometry geometry, int g) {
        return geometry.kinds()[g] != GroupKind.AUX;
    }

    private static boolean windowsServe(LookupGeometry geometry, boolean[][] present, int hit) {
        for (int g = 0; g < geometry.groups(); g++) {
            if (!keeps(geometry, g) || geometry.windowChunks()[g] < 0) {
                continue;
            }
            for (int c = firstKept(geometry, g, hit); c < hit; c++) {
                if (!present[g][c]) {
                    return false;
                }
            }
        }
        return true;
    }

    private static int leading(boolean[] present, int chunks) {
        int n = 0;
        while (n < chunks && present[n]) {
            n++;
        }
        return n;
    }
}
