package io.lmcache.server.storage;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * The objects whose locks expire: write-locked ones (a client that never finishes cannot hold
 * memory forever) and lookup read-locked ones. Guarded by the object store's lock.
 */
final class LockDeadlines {
    private final Set<StoredObject> writing = new LinkedHashSet<>();
    private final Set<StoredObject> readLocked = new HashSet<>();

    void writeLocked(StoredObject object) {
        writing.add(object);
    }

    void writeEnded(StoredObject object) {
        writing.remove(object);
    }

    void readLocked(StoredObject object) {
        readLocked.add(object);
    }

    void readEnded(StoredObject object) {
        readLocked.remove(object);
    }

    int writeLockedCount() {
        return writing.size();
    }

    int readLockedCount() {
        return readLocked.size();
    }

    /** Removes and returns the write-locked objects whose deadline has passed. */
    List<StoredObject> takeExpiredWrites(long nowNs) {
        List<StoredObject> expired = new ArrayList<>();
        for (StoredObject object : writing) {
            if (object.writeDeadlineNs - nowNs < 0) {
                expired.add(object);
            }
        }
        expired.forEach(writing::remove);
        return expired;
    }

    /** Removes and returns the read-locked objects whose deadline has passed. */
    List<StoredObject> takeExpiredReads(long nowNs) {
        List<StoredObject> expired = new ArrayList<>();
        for (StoredObject object : readLocked) {
            if (object.readDeadlineNs - nowNs < 0) {
                expired.add(object);
            }
        }
        expired.forEach(readLocked::remove);
        return expired;
    }
}
