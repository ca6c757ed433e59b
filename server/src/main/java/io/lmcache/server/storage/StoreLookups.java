package io.lmcache.server.storage;

import java.util.List;

/**
 * The lookups of a prefix in the store, under its lock: how many leading chunks every kv rank holds
 * (read-locking them for the request's readers), and which chunks of one object group are present
 * (a windowed LOOKUP finds its hit first, then locks only what it keeps).
 */
public final class StoreLookups {
    private StoreLookups() {}

    /**
     * Counts the leading chunks of {@code [fromChunk, toChunk)} whose objects exist for every kv rank
     * {@code 0..worldSize-1} and takes {@code readers} read locks on each of them (into {@code locks});
     * stops at the first miss.
     */
    public static int lookupAndLock(ObjectStore store, String model, String salt, int worldSize, int group, long[] hashes, int fromChunk,
            int toChunk, int readers, List<ObjectStore.ReadLock> locks) {
        store.lockStore();
        try {
            ObjectTable table = store.table();
            int namespace = table.namespace(model, salt);
            if (namespace == 0) {
                return 0;
            }
            long deadlineNs = store.readDeadlineNs();
            int hits = 0;
            StoredObject[] ranks = new StoredObject[worldSize];
            for (int chunk = fromChunk; chunk < toChunk; chunk++) {
                boolean all = true;
                for (int rank = 0; rank < worldSize && all; rank++) {
                    StoredObject object = table.get(namespace, rank, group, hashes[2 * chunk], hashes[2 * chunk + 1]);
                    all = object != null && object.state == StoredObject.State.READY;
                    ranks[rank] = object;
                }
                if (!all) {
                    break;
                }
                hits++;
                if (readers > 0) {
                    for (StoredObject object : ranks) {
                        locks.add(store.readLock(object, readers, deadlineNs));
                    }
                }
            }
            return hits;
        } finally {
            store.unlockStore();
        }
    }

    /**
     * Marks {@code present[chunk - fromChunk]} for each chunk of {@code [fromChunk, toChunk)} whose
     * objects of {@code group} are readable for every kv rank {@code 0..worldSize-1}; takes no lock
     * on them (a windowed LOOKUP first finds its hit, then locks only the chunks it keeps).
     */
    public static void presence(ObjectStore store, String model, String salt, int worldSize, int group, long[] hashes, int fromChunk,
            int toChunk, boolean[] present) {
        store.lockStore();
        try {
            ObjectTable table = store.table();
            int namespace = table.namespace(model, salt);
            for (int chunk = fromChunk; chunk < toChunk; chunk++) {
                boolean all = namespace != 0;
                for (int rank = 0; rank < worldSize && all; rank++) {
                    StoredObject object = table.get(namespace, rank, group, hashes[2 * chunk], hashes[2 * chunk + 1]);
                    all = object != null && object.state == StoredObject.State.READY;
                }
                present[chunk - fromChunk] = all;
            }
        } finally {
            store.unlockStore();
        }
    }
}
