package io.lmcache.server.l2;

import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The lock counts an adapter keeps for the keys its lookups reported present (§B.2: lookup-and-lock,
 * unlock that cannot fail), where the store itself has no locks (a file system, a Redis cluster). A
 * locked key is never deleted by the adapter's eviction. Thread-safe: one map update per call.
 */
final class KeyLocks {
    private final Map<L2Key, Integer> counts = new ConcurrentHashMap<>();

    public void lock(L2Key key) {
        counts.merge(key, 1, Integer::sum);
    }

    /** A map update cannot fail, so an unlock is never lost; unlocking a key that is not locked does nothing. */
    public void unlock(L2Key key) {
        counts.computeIfPresent(key, (k, count) -> count <= 1 ? null : count - 1);
    }

    public void unlockAll(List<L2Key> keys) {
        keys.forEach(this::unlock);
    }

    public boolean isLocked(L2Key key) {
        return counts.containsKey(key);
    }

    /** Keys locked at least once (for status). */
    public int lockedKeys() {
        return counts.size();
    }

    public void clear() {
        counts.clear();
    }
}
