package io.lmcache.server.l2;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.LongStream;

/**
 * An adapter's byte accounting and listeners (what LMCache's adapter base class keeps): bytes per
 * key, per cache salt and in all, against the capacity. A key counts once, however often it is
 * re-stored. Keys come from this process's stores and loads and, for an adapter that can list
 * what an earlier process left ({@link #found}), from that listing, which counts as older than
 * anything this process touched. A listener registered late is told every key known so far
 * (oldest first), so eviction sees the same keys whenever it is attached. Thread-safe.
 */
final class UsageAccounting {
    private final long capacityBytes;
    /** Known keys with their sizes, the ones found at start first (oldest first), then in the order this process stored them. */
    private LinkedHashMap<L2Key, Long> sizes = new LinkedHashMap<>();
    /** Keys known only from the listing at start: this process neither stored nor loaded them. */
    private final Set<L2Key> foundOnly = new HashSet<>();
    private final Map<String, Long> bytesBySalt = new HashMap<>();
    private final List<L2AdapterListener> listeners = new CopyOnWriteArrayList<>();
    private long usedBytes;

    UsageAccounting(long capacityBytes) {
        this.capacityBytes = capacityBytes;
    }

    /**
     * Adds the listener and tells it the keys known so far (found ones as found, oldest first; then the stored ones), under the
     * accounting's lock, so no deletion slips between the listing and the listener.
     */
    public synchronized void register(L2AdapterListener listener) {
        listeners.add(listener);
        List<L2Key> found = new ArrayList<>();
        List<L2Key> stored = new ArrayList<>();
        List<Long> foundSizes = new ArrayList<>();
        List<Long> storedSizes = new ArrayList<>();
        for (Map.Entry<L2Key, Long> entry : sizes.entrySet()) {
            boolean old = foundOnly.contains(entry.getKey());
            (old ? found : stored).add(entry.getKey());
            (old ? foundSizes : storedSizes).add(entry.getValue());
        }
        if (!found.isEmpty()) {
            listener.onKeysFound(found, foundSizes.stream().mapToLong(Long::longValue).toArray());
        }
        if (!stored.isEmpty()) {
            listener.onKeysStored(stored, storedSizes.stream().mapToLong(Long::longValue).toArray());
        }
    }

    public void stored(List<L2Key> keys, long[] objectSizes) {
        synchronized (this) {
            for (int i = 0; i < keys.size(); i++) {
                L2Key key = keys.get(i);
                foundOnly.remove(key);
                if (sizes.putIfAbsent(key, objectSizes[i]) == null) {
                    add(key, objectSizes[i]);
                }
            }
        }
        for (L2AdapterListener listener : listeners) {
            listener.onKeysStored(keys, objectSizes);
        }
    }

    /**
     * Keys an earlier process left, oldest first: counted, and placed before every key known already (older than anything this
     * process stored or loaded). A key known already keeps its place and size. Returns what was added: a file this process wrote
     * while the scan ran is seen by the scan but is no earlier run's.
     */
    AdapterLedger.Found found(List<L2Key> keys, long[] objectSizes) {
        List<L2Key> added = new ArrayList<>();
        List<Long> addedSizes = new ArrayList<>();
        synchronized (this) {
            LinkedHashMap<L2Key, Long> reordered = new LinkedHashMap<>();
            for (int i = 0; i < keys.size(); i++) {
                L2Key key = keys.get(i);
                if (!sizes.containsKey(key) && reordered.putIfAbsent(key, objectSizes[i]) == null) {
                    foundOnly.add(key);
                    add(key, objectSizes[i]);
                    added.add(key);
                    addedSizes.add(objectSizes[i]);
                }
            }
            reordered.putAll(sizes);
            sizes = reordered;
        }
        long[] array = addedSizes.stream().mapToLong(Long::longValue).toArray();
        if (!added.isEmpty()) {
            for (L2AdapterListener listener : listeners) {
                listener.onKeysFound(added, array);
            }
        }
        return new AdapterLedger.Found(added.size(), LongStream.of(array).sum());
    }

    private void add(L2Key key, long bytes) {
        usedBytes += bytes;
        bytesBySalt.merge(key.salt(), bytes, Long::sum);
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
                foundOnly.remove(key);
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

    /** The keys this process stored or loaded and has not deleted (not those only found at start). */
    public synchronized List<L2Key> knownKeys() {
        List<L2Key> keys = new ArrayList<>(sizes.size());
        for (L2Key key : sizes.keySet()) {
            if (!foundOnly.contains(key)) {
                keys.add(key);
            }
        }
        return keys;
    }
}
