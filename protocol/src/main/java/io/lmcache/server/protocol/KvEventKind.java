package io.lmcache.server.protocol;

import java.util.Locale;

/**
 * What a KV-event record says happened to its chunks (kv-events.md §3), as LMCache's {@code CacheEventType}: the one owner
 * of the kinds' wire names, which the encoder writes and the metrics label by.
 */
public enum KvEventKind {
    /** Chunks entered a medium: one record per chunk, with its hash, its parent's and its tokens. */
    STORED,
    /** Chunks left a medium: one record names several hashes. */
    REMOVED;

    private final String wireName = name().toLowerCase(Locale.ROOT);

    /** The record's {@code kind} on the wire ({@code "stored"}, {@code "removed"}). */
    public String wireName() {
        return wireName;
    }
}
