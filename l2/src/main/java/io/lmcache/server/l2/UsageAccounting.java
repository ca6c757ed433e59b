package io.lmcache.server.l2;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * An adapter's byte accounting and listeners (what LMCache's adapter base class keeps): bytes per
 * key known to this process, per cache salt and in all, against the capacity. A key counts once,
 * however often it is re-stored; keys written by an earlier process count from the first time this
 * one stores or loads them. Thread-safe.
 */
public final class UsageAccounting {
    private final long capacityBytes;
    private final Map<L2Key, Long> sizes = new HashMap<>();
    private final Map<String, Long> bytesBySalt = new HashMap<>();
    private final List<L2AdapterListener> listeners = new CopyOnWriteArrayList<>();
    private long usedBytes;

    public UsageAccounting(long capacityBytes) {
        this.capacityBytes = capacityBytes;
    }

    public void register(L2AdapterListener listener) {
        listeners.add(listener);
    }

    public void stored(List<L2Key> keys, long[] objectSizes) {
        synchronized (this) {
            for (int i = 0; i < keys.size(); i++) {
                L2Key key = keys.get(i);
                if (sizes.putIfAbsent(key, objectSizes[i]) == null) {
                    usedBytes += objectSizes[i];
                    bytesBySalt.merge(key.salt(), objectSizes[i], Long::sum);
                }
            }
        }
        for (L2AdapterListener listener : listeners) {
            listener.onKeysStored(keys, objectSizes);
        }
    }

    public void accessed(List<L2Key> keys) {
        for (L2AdapterListener listener : listeners) {
            listener.onKeysAccessed(keys);
        }
    }

    public void deleted(List<L2Key> keys) {
        synchronized (this) {
            for (L2Key key : keys) {
                Long size = sizes.remove(key);
                if (size != null) {
                    usedBytes -= size;
                    bytesBySalt.computeIfPresent(key.salt(), (salt, bytes) -> bytes - size == 0 ? null : bytes - size);
                }
            }
        }
        for (L2AdapterListener listener : listeners) {
            listener.onKeysDeleted(keys);
        }
    }

    public synchronized AdapterUsage usage() {
        return new AdapterUsage(usedBytes, capacityBytes, bytesBySalt);
    }

    /** The keys this process stored or loaded and has not deleted. */
    public synchronized List<L2Key> knownKeys() {
        return new ArrayList<>(sizes.keySet());
    }
}
