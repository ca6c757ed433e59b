package io.lmcache.server.transfer;

import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.storage.ChunkKey;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoredObject;
import java.util.List;

/**
 * The per-chunk steps of a transfer on the object store, shared by both transfer modules:
 * reserve (write-lock a new object), pin (read a stored one), commit, abort and unpin. Commits and
 * unpins go last chunk first, so the head of the prefix is the most recently used.
 */
public final class ChunkObjects {
    private ChunkObjects() {}

    /** The objects a STORE reserved (null where the chunk is stored already), and whether every chunk found room. */
    public record Reservation(StoredObject[] objects, boolean allFit) {}

    /** Reserves a chunk's object: a new object, {@link ObjectStore#EXISTS} or {@link ObjectStore#NO_MEMORY}. */
    public static StoredObject reserve(ObjectStore store, CacheKey key, ChunkHashes hashes, int chunk, int group, long objectBytes,
            int format) {
        return store.reserve(chunkKey(key, hashes, chunk, group), objectBytes, format);
    }

    /** Pins a stored, readable chunk object; null when it is not there (or in another format). */
    public static StoredObject pin(ObjectStore store, CacheKey key, ChunkHashes hashes, int chunk, int group, long objectBytes, int format) {
        return store.pinReady(chunkKey(key, hashes, chunk, group), format, objectBytes);
    }

    /** The store's key of a chunk's object: the worker's kv rank, {@code group}, the chunk's hash. */
    public static ChunkKey chunkKey(CacheKey key, ChunkHashes hashes, int chunk, int group) {
        return new ChunkKey(key.modelName(), key.cacheSalt(), key.tags(), key.workerId(), group, hashes.hash(chunk));
    }

    /** Reserves every (chunk, group) object a plan moves, stopping at the first chunk without room: a later one could never be a prefix hit. */
    public static Reservation reserveAll(ObjectStore store, CacheKey key, TransferPlan plan) {
        StoredObject[] reserved = new StoredObject[plan.objectCount()];
        for (int j = 0; j < plan.range().count(); j++) {
            for (int g = 0; g < plan.parts().size(); g++) {
                TransferPlan.GroupPart part = plan.parts().get(g);
                if (!part.moves(j)) {
                    continue;
                }
                StoredObject object = reserve(store, key, plan.hashes(), plan.chunk(j), part.objectGroup(), part.objectBytes(), part.format());
                if (object == ObjectStore.NO_MEMORY) {
                    return new Reservation(reserved, false);
                }
                reserved[plan.objectIndex(j, g)] = object == ObjectStore.EXISTS ? null : object;
            }
        }
        return new Reservation(reserved, true);
    }

    /**
     * Pins every (chunk, group) object a plan moves, all or nothing: null (with nothing left pinned) when one is missing. A
     * chunk still being written by a STORE that was answered before its copy ended is waited for (bounded by the write
     * lock's TTL): LMCache's client may send this RETRIEVE the moment it has that reply, and the read must see the write.
     */
    public static StoredObject[] pinAll(ObjectStore store, CacheKey key, TransferPlan plan) {
        StoredObject[] pinned = new StoredObject[plan.objectCount()];
        for (int j = 0; j < plan.range().count(); j++) {
            for (int g = 0; g < plan.parts().size(); g++) {
                TransferPlan.GroupPart part = plan.parts().get(g);
                if (!part.moves(j)) {
                    continue;
                }
                StoredObject object = store.pinReady(chunkKey(key, plan.hashes(), plan.chunk(j), part.objectGroup()), part.format(),
                        part.objectBytes(), Long.MAX_VALUE);
                if (object == null) {
                    unpinAll(store, pinned, false);
                    return null;
                }
                pinned[plan.objectIndex(j, g)] = object;
            }
        }
        return pinned;
    }

    /** Publishes reserved objects (nulls skipped); true when every one was still reserved. */
    public static boolean commitAll(ObjectStore store, StoredObject[] reserved) {
        boolean all = true;
        for (int j = reserved.length - 1; j >= 0; j--) {
            if (reserved[j] != null) {
                all &= store.commit(reserved[j]);
            }
        }
        return all;
    }

    public static boolean commitAll(ObjectStore store, List<StoredObject> reserved) {
        boolean all = true;
        for (int i = reserved.size() - 1; i >= 0; i--) {
            all &= store.commit(reserved.get(i));
        }
        return all;
    }

    public static void abortAll(ObjectStore store, StoredObject[] reserved) {
        for (StoredObject object : reserved) {
            if (object != null) {
                store.abort(object);
            }
        }
    }

    public static void abortAll(ObjectStore store, List<StoredObject> reserved) {
        reserved.forEach(store::abort);
    }

    public static void unpinAll(ObjectStore store, StoredObject[] pinned, boolean read) {
        for (int j = pinned.length - 1; j >= 0; j--) {
            if (pinned[j] != null) {
                store.unpin(pinned[j], read);
            }
        }
    }

    public static void unpinAll(ObjectStore store, List<StoredObject> pinned, boolean read) {
        for (int i = pinned.size() - 1; i >= 0; i--) {
            store.unpin(pinned.get(i), read);
        }
    }
}
