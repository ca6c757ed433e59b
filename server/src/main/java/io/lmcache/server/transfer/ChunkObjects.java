package io.lmcache.server.transfer;

import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.storage.ChunkKey;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoredObject;
import java.util.List;

/**
 * The per-chunk steps of a transfer on the object store, shared by both transfer modules:
 * reserve (write-lock a new object), pin (read a stored one), abort and unpin (commits: {@link ObjectStore#commitAll}). Unpins
 * go last chunk first, as commits do, so the head of the prefix is the most recently used.
 */
public final class ChunkObjects {
    private ChunkObjects() {}

    /** Reserves a chunk's object: a new object, {@link ObjectStore#EXISTS} or {@link ObjectStore#NO_MEMORY}. */
    public static StoredObject reserve(ObjectStore store, CacheKey key, ChunkHashes hashes, int chunk, int group, long objectBytes,
            int format) {
        return store.reserve(chunkKey(key, hashes, chunk, group), objectBytes, format);
    }

    /** {@link #reserve} for a chunk another process fills (an engine-driven worker): see {@link ObjectStore#reserveExternal}. */
    public static StoredObject reserveExternal(ObjectStore store, CacheKey key, ChunkHashes hashes, int chunk, int group, long objectBytes,
            int format) {
        return store.reserveExternal(chunkKey(key, hashes, chunk, group), objectBytes, format);
    }

    /** Pins a stored, readable chunk object; null when it is not there (or in another format). */
    public static StoredObject pin(ObjectStore store, CacheKey key, ChunkHashes hashes, int chunk, int group, long objectBytes, int format) {
        return store.pinReady(chunkKey(key, hashes, chunk, group), objectBytes, format);
    }

    /** The store's key of a chunk's object: the worker's kv rank, {@code group}, the chunk's hash. */
    public static ChunkKey chunkKey(CacheKey key, ChunkHashes hashes, int chunk, int group) {
        return new ChunkKey(key.modelName(), key.cacheSalt(), key.tags(), key.workerId(), group, hashes.hash(chunk));
    }

    /**
     * A STORE's objects, reserved chunk by chunk while its pieces are emitted ({@link GroupPieces#emitReserving}), so that a
     * chunk's hash ({@link ChunkHashes#deferred}) and reservation overlap the copies of the chunks before it. Stops at the first
     * chunk without room: a later one could never be a prefix hit. Written by the emitting thread only; read once the copy
     * has been submitted (or by its completion, which the copy path runs after the emission).
     */
    public static final class Reserving extends ByChunk {
        public Reserving(ObjectStore store, CacheKey key, TransferPlan plan) {
            super(store, key, plan);
        }

        @Override
        StoredObject takeOne(int j, TransferPlan.GroupPart part) {
            StoredObject object = ChunkObjects.reserve(store, key, plan.hashes(), plan.chunk(j), part.objectGroup(), part.objectBytes(),
                    part.format());
            return object == ObjectStore.NO_MEMORY ? null : object;
        }

        /** Whether every chunk reached found room. */
        public boolean allFit() {
            return complete;
        }
    }

    /**
     * Pins every (chunk, group) object a plan moves, all or nothing: null (with nothing left pinned) when one is missing. A
     * chunk still being written by a STORE that was answered before its copy ended is waited for (bounded by the write
     * lock's TTL): LMCache's client may send this RETRIEVE the moment it has that reply, and the read must see the write.
     */
    public static StoredObject[] pinAll(ObjectStore store, CacheKey key, TransferPlan plan) {
        Pinning pinning = Pinning.ahead(store, key, plan);
        if (!pinning.allFound()) {
            unpinAll(store, pinning.objects(), false);
            return null;
        }
        return pinning.objects();
    }

    /**
     * A RETRIEVE's objects, pinned chunk by chunk while its pieces are emitted ({@link GroupPieces#emitPinning}), so that the
     * store's lookups of the later chunks overlap the copies of those before them instead of preceding the first copy (128
     * pins took ~46 µs of a Qwen-like 64-chunk RETRIEVE before it on the H100, bench/RESULTS.md#gpu-hybrid-models). Stops at
     * the first chunk with an object missing: the RETRIEVE then answers false, so the worker recomputes those tokens and
     * overwrites what was copied before. Written by the emitting thread only; read once the copy has been submitted (or by its
     * completion, which the copy path runs after the emission).
     */
    public static final class Pinning extends ByChunk {
        private final long fillWaitNs;
        private int ahead;

        private Pinning(ObjectStore store, CacheKey key, TransferPlan plan, long fillWaitNs) {
            super(store, key, plan);
            this.fillWaitNs = fillWaitNs;
        }

        /**
         * A RETRIEVE's pins. The emission runs inside the copy call, which on a GPU holds the device's retrieve lane, so a pin
         * there never waits for a write in flight (a write may last until its TTL: every RETRIEVE of the GPU would wait behind
         * it). With no write in flight now, none it should wait for can begin later: a STORE answered before this RETRIEVE came
         * has ended its writes, and a chunk another writer reserves from here on is one this request may miss. Otherwise every
         * chunk is pinned now, outside the lane, waiting for its write as {@link #pinAll} does (a RETRIEVE sent the moment a
         * STORE's reply came must see that STORE's chunks).
         */
        public static Pinning forRetrieve(ObjectStore store, CacheKey key, TransferPlan plan) {
            return store.writesInFlight() ? ahead(store, key, plan) : new Pinning(store, key, plan, 0);
        }

        /** Every chunk pinned now, each write in flight waited for, up to the first chunk with an object missing. */
        private static Pinning ahead(ObjectStore store, CacheKey key, TransferPlan plan) {
            Pinning now = new Pinning(store, key, plan, Long.MAX_VALUE);
            while (now.ahead < plan.range().count() && now.take(now.ahead)) {
                now.ahead++;
            }
            return now;
        }

        /** The range's {@code j}-th chunk's objects, pinned now unless they were ahead; false when one is missing. */
        boolean pin(int j) {
            if (j < ahead) {
                return true;
            }
            return complete && take(j);
        }

        @Override
        StoredObject takeOne(int j, TransferPlan.GroupPart part) {
            return store.pinReady(chunkKey(key, plan.hashes(), plan.chunk(j), part.objectGroup()), part.objectBytes(), part.format(),
                    fillWaitNs);
        }

        /** Whether every chunk's objects were found and pinned. */
        public boolean allFound() {
            return complete;
        }
    }

    /**
     * A transfer's objects taken chunk by chunk as its pieces are emitted ({@link Reserving}, {@link Pinning}): indexed as the
     * plan's, null where a group does not move a chunk, where the chunk is stored already (a reservation) or was not reached.
     */
    public abstract static sealed class ByChunk permits Reserving, Pinning {
        final ObjectStore store;
        final CacheKey key;
        final TransferPlan plan;
        private final StoredObject[] objects;
        boolean complete = true;

        ByChunk(ObjectStore store, CacheKey key, TransferPlan plan) {
            this.store = store;
            this.key = key;
            this.plan = plan;
            this.objects = new StoredObject[plan.objectCount()];
        }

        /**
         * Takes (reserves, pins) the range's {@code j}-th chunk's objects, group by group; false at the first that could not be
         * taken (no room, missing), those before it in the chunk kept.
         */
        final boolean take(int j) {
            for (int g = 0; g < plan.parts().size(); g++) {
                TransferPlan.GroupPart part = plan.parts().get(g);
                if (!part.moves(j)) {
                    continue;
                }
                StoredObject object = takeOne(j, part);
                if (object == null) {
                    complete = false;
                    return false;
                }
                objects[plan.objectIndex(j, g)] = object == ObjectStore.EXISTS ? null : object;
            }
            return true;
        }

        /** One (chunk, group) object: the object, {@link ObjectStore#EXISTS} (nothing to write) or null (the chunk stops). */
        abstract StoredObject takeOne(int j, TransferPlan.GroupPart part);

        /** The objects taken so far. */
        public StoredObject[] objects() {
            return objects;
        }
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
