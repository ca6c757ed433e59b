package io.lmcache.server.transfer;

/**
 * The stored object of one object group of a registered layout: its size and byte order. A LOOKUP
 * that loads from L2 reserves L1 objects of these shapes (LMCache passes the registration's
 * {@code group_layout_descs} to its adapters for the same reason). Today a registration has one
 * object group, 0; a hybrid registration lists one shape per group.
 *
 * @param l2Tag 0 when the object's bytes are LMCache's object layout (its L2 name is LMCache's): every layout but the
 *     block-order fallback of {@link KvLayout#blockOrder}, which this tag names apart ({@code l2.L2Key#layoutTag})
 * @param l2Layout the object's full format as L2 records it beside the bytes ({@code l2.L2Key#layout}); "" when not known
 */
public record ObjectShape(int objectGroup, long objectBytes, int format, int l2Tag, String l2Layout) {
    /** A shape in LMCache's object layout whose full format is not known (the engine-driven path's token-major objects). */
    public ObjectShape(int objectGroup, long objectBytes, int format) {
        this(objectGroup, objectBytes, format, 0, "");
    }
}
