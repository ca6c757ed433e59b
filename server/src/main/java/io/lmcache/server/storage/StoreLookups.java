package io.lmcache.server.storage;

import java.util.List;

/**
 * The lookups of a prefix in the store, under its lock: how many leading chunks every kv rank holds
 * (read-locking them for the request's readers), and which chunks of one object group are present
 * (a windowed LOOKUP finds its hit first, then locks only what it keeps). With {@code fills}, a
 * chunk still being written (its STORE replied to, its copy not ended) counts as present and its
 * fill is watched (see {@link PendingFills}): the caller then gives its locks back and looks again
 * once those writes have ended. A lookup given no {@code fills} sees only published chunks.
 */
public final class StoreLookups {
    private StoreLookups() {}

    /**
     * Counts the leading chunks of {@code [fromChunk, toChunk)} whose objects exist for every kv rank
     * {@code 0..worldSize-1} and takes {@code readers} read locks on each of them (into {@code locks});
     * stops at the first miss. Once {@code fills} holds a write in flight no further locks are taken.
     */
    public static int lookupAndLock(ObjectStore store, String model, String salt, int worldSize, int group, long[] hashes, int fromChunk,
            int toChunk, int readers, List<ObjectStore.ReadLock> locks, PendingFills fills) {
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
                if (!chunkPresent(table, namespace, worldSize, group, hashes, chunk, ranks, fills)) {
                    break;
                }
                hits++;
                if (readers > 0 && (fills == null || !fills.any())) {
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
            int toChunk, boolean[] present, PendingFills fills) {
        store.lockStore();
        try {
            ObjectTable table = store.table();
            int namespace = table.namespace(model, salt);
            StoredObject[] ranks = new StoredObject[worldSize];
            for (int chunk = fromChunk; chunk < toChunk; chunk++) {
                present[chunk - fromChunk] = namespace != 0 && chunkPresent(table, namespace, worldSize, group, hashes, chunk, ranks, fills);
            }
        } finally {
            store.unlockStore();
        }
    }

    /**
     * Whether every rank's object of the chunk is READY, or (with {@code fills}) READY or being written; the ranks' objects
     * go into {@code ranks}. Only a chunk present for every rank has its writes watched: a missing rank stays a miss.
     */
    private static boolean chunkPresent(ObjectTable table, int namespace, int worldSize, int group, long[] hashes, int chunk,
            StoredObject[] ranks, PendingFills fills) {
        boolean writing = false;
        for (int rank = 0; rank < worldSize; rank++) {
            StoredObject object = table.get(namespace, rank, group, hashes[2 * chunk], hashes[2 * chunk + 1]);
            if (object == null || (object.state != StoredObject.State.READY && (fills == null || object.state != StoredObject.State.WRITING))) {
                return false;
            }
            writing |= object.state == StoredObject.State.WRITING;
            ranks[rank] = object;
        }
        if (writing) {
            for (StoredObject object : ranks) {
                if (object.state == StoredObject.State.WRITING) {
                    fills.watch(object);
                }
            }
        }
        return true;
    }
}
