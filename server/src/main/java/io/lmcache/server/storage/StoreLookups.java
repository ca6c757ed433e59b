package io.lmcache.server.storage;

import java.util.List;

/**
 * The prefix walks of {@link ObjectStore#lookupAndLock} and {@link ObjectStore#presence}, run by the
 * store under its lock: how many leading chunks every kv rank holds (read-locking them for the
 * request's readers), and which chunks of one object group are present (a windowed LOOKUP finds its
 * hit first, then locks only what it keeps). With {@code fills}, a chunk still being written (its
 * STORE replied to, its copy not ended) counts as present and its fill is watched (see
 * {@link PendingFills}): the caller then gives its locks back and looks again once those writes
 * have ended. A lookup given no {@code fills} sees only published chunks. A chunk another process fills (an engine-driven
 * reservation) is never watched: it is a miss until committed, as LMCache's staging objects are unreadable
 * ({@code L1Manager.reserve_read}: "a key that is only being written is reported as KEY_NOT_EXIST"), and its worker may die.
 */
final class StoreLookups {
    private final ObjectStore store;
    private final ObjectTable table;

    StoreLookups(ObjectStore store, ObjectTable table) {
        this.store = store;
        this.table = table;
    }

    /**
     * Counts the leading chunks of {@code [fromChunk, toChunk)} whose objects exist for every kv rank and takes {@code readers}
     * read locks on each of them (into {@code locks}); stops at the first miss. Once {@code fills} holds a write in flight no
     * further locks are taken. Lock held.
     */
    int lookupAndLock(PrefixKeys prefix, int fromChunk, int toChunk, int readers, List<ObjectStore.ReadLock> locks, PendingFills fills) {
        int namespace = table.namespace(prefix.model(), prefix.salt(), prefix.tags());
        if (namespace == 0) {
            return 0;
        }
        long deadlineNs = store.readDeadlineNs();
        int hits = 0;
        StoredObject[] ranks = new StoredObject[prefix.worldSize()];
        for (int chunk = fromChunk; chunk < toChunk; chunk++) {
            if (!chunkPresent(namespace, prefix, chunk, ranks, fills)) {
                break;
            }
            boolean locking = readers > 0 && (fills == null || !fills.any());
            if (locking && table.tenantCount() > 1 && !table.readShares.allows(prefix.salt(), unlockedBytes(ranks))) {
                // the tenant's read locks hold their share of the pool: the rest is a miss (its fills watched so far stay watched)
                table.counters().readShareMisses.increment();
                break;
            }
            hits++;
            if (locking) {
                for (StoredObject object : ranks) {
                    locks.add(store.readLock(object, readers, deadlineNs, true));
                }
            }
        }
        return hits;
    }

    /** The bytes of {@code ranks} that no read lock counts yet (what locking them adds to their tenant's share). */
    private static long unlockedBytes(StoredObject[] ranks) {
        long bytes = 0;
        for (StoredObject object : ranks) {
            bytes += object.readShare == null ? object.bytes : 0;
        }
        return bytes;
    }

    /** Marks {@code present[chunk - fromChunk]} for each chunk readable for every kv rank; takes no lock on them. Lock held. */
    void presence(PrefixKeys prefix, int fromChunk, int toChunk, boolean[] present, PendingFills fills) {
        int namespace = table.namespace(prefix.model(), prefix.salt(), prefix.tags());
        StoredObject[] ranks = new StoredObject[prefix.worldSize()];
        for (int chunk = fromChunk; chunk < toChunk; chunk++) {
            present[chunk - fromChunk] = namespace != 0 && chunkPresent(namespace, prefix, chunk, ranks, fills);
        }
    }

    /**
     * Whether every rank's object of the chunk is READY, or (with {@code fills}) READY or being written; the ranks' objects
     * go into {@code ranks}. Only a chunk present for every rank has its writes watched: a missing rank stays a miss.
     */
    private boolean chunkPresent(int namespace, PrefixKeys prefix, int chunk, StoredObject[] ranks, PendingFills fills) {
        boolean writing = false;
        ChunkHash hash = prefix.hash(chunk);
        for (int rank = 0; rank < ranks.length; rank++) {
            StoredObject object = table.get(namespace, rank, prefix.group(), hash);
            if (object == null || (object.state != StoredObject.State.READY
                    && (fills == null || object.state != StoredObject.State.WRITING || object.externalFill))) {
                return false; // another process's fill (an engine-driven reservation) is a miss: its worker may be gone
            }
            writing |= object.state == StoredObject.State.WRITING;
            ranks[rank] = object;
        }
        if (writing && !table.mayWatch(ranks.length)) {
            table.counters().lookupWatchesRefused.increment();
            return false; // too many lookups wait already: this one counts the chunk as a miss, as before a commit
        }
        if (writing) {
            for (StoredObject object : ranks) {
                if (object.state == StoredObject.State.WRITING) {
                    fills.watch(object);
                    table.watched(1);
                }
            }
        }
        return true;
    }
}
