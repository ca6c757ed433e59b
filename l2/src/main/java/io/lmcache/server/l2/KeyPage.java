package io.lmcache.server.l2;

import java.util.List;

/**
 * One page of an adapter's listing ({@link L2Adapter#listKeys}, LMCache's {@code KeyListPage}): keys resident in the adapter with
 * their sizes, in the adapter's order, and the opaque cursor of the next page (null on the last).
 */
public record KeyPage(List<Entry> entries, String nextCursor) {
    /** One resident object: its key (read back from its name: no layout) and its size in bytes. */
    public record Entry(L2Key key, long sizeBytes) {}

    public KeyPage {
        entries = List.copyOf(entries);
    }
}
