package io.lmcache.server.storage;

import java.util.List;

/**
 * What the L2 controllers do to L1 objects, each under the object store's lock: check which keys
 * are stored, read-lock one, publish an object loaded from L2 with its readers' locks taken in the
 * same step (LMCache's {@code finish_write_and_reserve_read}), and drop a written-through object
 * from L1 ({@code skip_l1}). Objects loaded for one request are temporary: freed with their last
 * read lock, unless kept ({@code retain}).
 */
public final class TierAccess {
    private final ObjectStore store;

    public TierAccess(ObjectStore store) {
        this.store = store;
    }

    /** Marks in {@code ready} which of {@code count} keys {@code (ranks[i], groups[i], hash i)} have a READY object. */
    public void readyKeys(String model, String salt, int[] ranks, int[] groups, long[] hashHi, long[] hashLo, boolean[] ready) {
        store.lockStore();
        try {
            int namespace = store.table().namespace(model, salt);
            for (int i = 0; i < ready.length; i++) {
                StoredObject object = namespace == 0 ? null : store.table().get(namespace, ranks[i], groups[i], hashHi[i], hashLo[i]);
                ready[i] = object != null && object.state == StoredObject.State.READY;
            }
        } finally {
            store.unlockStore();
        }
    }

    /** Takes {@code readers} read locks on the key's READY object (into {@code locks}); false when there is none. */
    public boolean lockReady(String model, String salt, int kvRank, int group, long hashHi, long hashLo, int readers,
            List<ObjectStore.ReadLock> locks) {
        store.lockStore();
        try {
            int namespace = store.table().namespace(model, salt);
            StoredObject object = namespace == 0 ? null : store.table().get(namespace, kvRank, group, hashHi, hashLo);
            if (object == null || object.state != StoredObject.State.READY) {
                return false;
            }
            if (readers > 0) {
                locks.add(store.readLock(object, readers, store.readDeadlineNs()));
            }
            return true;
        } finally {
            store.unlockStore();
        }
    }

    /**
     * Publishes an object filled from L2 and takes {@code readers} read locks on it at once, so it is never visible
     * unlocked; {@code temporary}: freed when the last lock goes. Null when the reservation was reclaimed meanwhile.
     * With no readers nothing would ever release it, so it is kept as an ordinary object.
     */
    public ObjectStore.ReadLock commitLoaded(StoredObject object, int readers, boolean temporary) {
        store.lockStore();
        try {
            if (!store.publish(object)) {
                return null;
            }
            if (readers <= 0) {
                store.table().relinkIfUnlocked(object);
                return null;
            }
            object.temporary = temporary;
            return store.readLock(object, readers, store.readDeadlineNs());
        } finally {
            store.unlockStore();
        }
    }

    /** Removes an object every adapter now holds, unless someone reads or locks it; true when removed. */
    public boolean dropIfIdle(StoredObject object) {
        store.lockStore();
        try {
            if (object.state != StoredObject.State.READY || object.isLocked() || object.doomed) {
                return false;
            }
            store.table().removeAndFree(object, StoreCounters.EvictionReason.MOVED_TO_L2);
            return true;
        } finally {
            store.unlockStore();
        }
    }
}
