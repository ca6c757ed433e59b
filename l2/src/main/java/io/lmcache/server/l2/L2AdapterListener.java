package io.lmcache.server.l2;

import java.util.List;

/**
 * What an adapter tells about its keys (LMCache's {@code L2AdapterListener}): it feeds L2
 * eviction (LRU order) and accounting. Called on the adapter's worker threads or the deleting
 * thread; implementations are quick and thread-safe.
 */
public interface L2AdapterListener {
    /** {@code keys[i]} is stored with {@code sizes[i]} bytes (a re-store too: it touches the key). */
    default void onKeysStored(List<L2Key> keys, long[] sizes) {
    }

    /**
     * {@code keys[i]}, {@code sizes[i]} bytes, was left by an earlier process (found at start, oldest first): older than every key
     * stored or loaded since. The default treats it as stored.
     */
    default void onKeysFound(List<L2Key> keys, long[] sizes) {
        onKeysStored(keys, sizes);
    }

    /** The keys were loaded. */
    default void onKeysAccessed(List<L2Key> keys) {
    }

    /** The keys were removed. */
    default void onKeysDeleted(List<L2Key> keys) {
    }
}
