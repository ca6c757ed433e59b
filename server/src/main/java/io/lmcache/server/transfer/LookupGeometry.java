package io.lmcache.server.transfer;

/**
 * What a LOOKUP of one model needs to know about its object groups (LMCache's
 * {@code AttnWindowDesc}): per object group its window in chunks (-1 = full attention) and its kind.
 */
public record LookupGeometry(int[] windowChunks, GroupKind[] kinds) {
    /** A model with one full-attention object group: every non-hybrid registration, and the default. */
    public static final LookupGeometry SINGLE = new LookupGeometry(new int[] {-1}, new GroupKind[] {GroupKind.ATTENTION});

    public int groups() {
        return windowChunks.length;
    }

    /** One full-attention group: the hit is the count of leading chunks present, the common fast path. */
    public boolean plain() {
        return windowChunks.length == 1 && windowChunks[0] < 0 && kinds[0] != GroupKind.AUX;
    }
}
