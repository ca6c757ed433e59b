package io.lmcache.server.storage;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.LongPredicate;

/**
 * Keys of objects a policy evicted recently (ghosts: no memory), oldest first, with the bytes they stood for: ARC's B1
 * and B2 and S3FIFO's ghost FIFO. Guarded by the store's lock.
 */
final class GhostKeys {
    private final LinkedHashMap<ObjectKey, Long> keys = new LinkedHashMap<>();
    private long bytes;

    /** {@code key} was evicted, freeing {@code objectBytes}. */
    void add(ObjectKey key, long objectBytes) {
        Long previous = keys.put(key, objectBytes);
        bytes += objectBytes - (previous == null ? 0 : previous);
    }

    /** The bytes {@code key} stood for, removing it, or null when it is no ghost here. */
    Long remove(ObjectKey key) {
        Long ghost = keys.remove(key);
        if (ghost != null) {
            bytes -= ghost;
        }
        return ghost;
    }

    /** Forgets the oldest ghosts while {@code tooMany} holds for the bytes left. */
    void trimWhile(LongPredicate tooMany) {
        Iterator<Map.Entry<ObjectKey, Long>> oldest = keys.entrySet().iterator();
        while (tooMany.test(bytes) && oldest.hasNext()) {
            bytes -= oldest.next().getValue();
            oldest.remove();
        }
    }

    long bytes() {
        return bytes;
    }

    int size() {
        return keys.size();
    }

    /** The byte count equals the ghosts' sum (the audit). */
    void check(String name) {
        long sum = keys.values().stream().mapToLong(Long::longValue).sum();
        if (sum != bytes) {
            throw new IllegalStateException(name + " ghost bytes " + bytes + " differ from their sum " + sum);
        }
    }
}
