package io.lmcache.server.storage;

import io.lmcache.server.config.EvictionPolicy;
import io.lmcache.server.storage.StoreCounters.EvictionReason;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Where the store's objects are: the key map, their memory (allocator and namespaces), their
 * eviction order, and the sizes kept as they change. The object store decides when locks begin and
 * end; this table applies what follows from that. Guarded by the object store's lock.
 */
final class ObjectTable {
    private final SlabAllocator allocator;
    private final EvictionPolicy policy;
    private final StoreCounters counters;
    private final NamespaceTable namespaces = new NamespaceTable();
    private final Map<ObjectKey, StoredObject> objects = new HashMap<>();
    /** Removed by a forced clear but still in use: their memory is freed when the use ends. */
    private final Set<StoredObject> doomedInUse = new HashSet<>();
    private final EvictionLists lists;
    private long objectBytes;
    /** Objects in the map with an in-flight copy (what status calls pinned). */
    private int pinnedObjects;
    private int readyRegions;
    /** Lookups to tell, once the store's lock is released, that a fill they waited for ended. */
    private final List<PendingFills> endedFills = new ArrayList<>();
    /** Fills ended since the store last signalled its waiting readers. */
    private int fillsEnded;
    /** The KV-event log's feed of published objects that leave (null: none); {@link #removalsEnded} flushes it. */
    RemovalListener removals;
    private boolean removedAny;

    ObjectTable(SlabAllocator allocator, EvictionPolicy policy, StoreCounters counters) {
        this.allocator = allocator;
        this.policy = policy;
        this.counters = counters;
        this.lists = new EvictionLists(allocator.regionCount());
    }

    void addReadyRegion(int region) {
        if (!allocator.isReady(region)) {
            readyRegions++;
        }
        allocator.addReadyRegion(region);
    }

    long maxObjectBytes() {
        return allocator.maxObjectBytes();
    }

    /** The id of a (model, salt) pair, or 0 when no object of it exists. */
    int namespace(String model, String salt) {
        return namespaces.peek(model, salt);
    }

    String model(StoredObject object) {
        return namespaces.model(object.key.namespace());
    }

    String salt(StoredObject object) {
        return namespaces.salt(object.key.namespace());
    }

    StoredObject get(int namespace, int kvRank, int group, long hashHi, long hashLo) {
        return objects.get(new ObjectKey(namespace, kvRank, group, hashHi, hashLo));
    }

    /** A new WRITING object in fresh memory (evicting on demand), or null when none could be found. */
    StoredObject insert(String model, String salt, int kvRank, int group, long hashHi, long hashLo, long bytes, int format, long nowNs) {
        long offset = allocateEvicting(bytes);
        if (offset < 0) {
            return null;
        }
        int namespace = namespaces.acquire(model, salt);
        StoredObject object = new StoredObject(new ObjectKey(namespace, kvRank, group, hashHi, hashLo), offset, bytes, format, nowNs);
        objects.put(object.key, object);
        counters.lifecycle().written(object, salt);
        lists.linkRegion(object, allocator.regionOf(offset));
        objectBytes += bytes;
        return object;
    }

    /** The least recently used evictable object, or null. */
    StoredObject lruTail() {
        return lists.lruTail();
    }

    /** {@code object} is now locked (read or pinned): no longer a victim. */
    void locked(StoredObject object) {
        lists.unlinkLru(object);
    }

    void pinned(StoredObject object) {
        lists.unlinkLru(object);
        if (object.pins++ == 0) {
            pinnedObjects++;
        }
    }

    void unpinned(StoredObject object) {
        if (--object.pins == 0 && !object.doomed) {
            // a doomed object left the pinned count when a forced clear took it out of the map
            pinnedObjects--;
        }
    }

    /** The objects lookups can find, copied (a clear changes the map while walking it). */
    List<StoredObject> mapped() {
        return new ArrayList<>(objects.values());
    }

    /** Out of view at once (forced clear of an object in use); its memory goes when the use ends. */
    void doom(StoredObject object) {
        fillEnded(object);
        objects.remove(object.key, object);
        object.doomed = true;
        doomedInUse.add(object);
        lists.unlinkLru(object);
        if (object.pins > 0) {
            pinnedObjects--;
        }
    }

    void removeAndFree(StoredObject object, EvictionReason reason) {
        // by identity: after a forced clear the key may already name a newer object
        objects.remove(object.key, object);
        freeObject(object, reason);
    }

    /** Returns the memory; the object must already be out of the map or doomed. */
    void freeObject(StoredObject object, EvictionReason reason) {
        if (object.state == StoredObject.State.FREED) {
            throw new IllegalStateException("object freed twice: " + object);
        }
        if (removals != null && object.state == StoredObject.State.READY && !object.temporary) {
            removals.removed(model(object), object.key.hashHi(), object.key.hashLo()); // a loaded copy was never announced
            removedAny = true;
        }
        fillEnded(object);
        doomedInUse.remove(object);
        lists.unlinkLru(object);
        lists.unlinkRegion(object, allocator.regionOf(object.offset));
        allocator.free(object.offset);
        namespaces.release(object.key.namespace());
        objectBytes -= object.bytes;
        counters.evicted(reason, object.bytes);
        counters.lifecycle().removed(object, reason == EvictionReason.WATERMARK || reason == EvictionReason.DEMAND);
        object.state = StoredObject.State.FREED;
    }

    /**
     * {@code object} leaves WRITING (published, aborted, reclaimed, doomed): its watching lookups are told after the lock is
     * released, and readers waiting in {@code pinReady} are woken. Idempotent per fill.
     */
    void fillEnded(StoredObject object) {
        if (object.state != StoredObject.State.WRITING || object.doomed) {
            return;
        }
        fillsEnded++;
        List<PendingFills> watchers = object.takeWatchers();
        if (watchers != null) {
            endedFills.addAll(watchers);
        }
    }

    /** The end of a lock hold: the removal feed hears that this hold's removals are complete. */
    void removalsEnded() {
        if (removedAny) {
            removedAny = false;
            removals.batchEnded();
        }
    }

    /** Fills ended since the last call (the store then wakes its waiting readers). */
    int takeFillsEnded() {
        int ended = fillsEnded;
        fillsEnded = 0;
        return ended;
    }

    /** The lookups to tell, or null; the list is emptied. */
    PendingFills[] takeEndedWatchers() {
        if (endedFills.isEmpty()) {
            return null;
        }
        PendingFills[] taken = endedFills.toArray(new PendingFills[0]);
        endedFills.clear();
        return taken;
    }

    /** A copy out of {@code object} served a read (the chunk lifecycle's touch). */
    void read(StoredObject object) {
        counters.lifecycle().read(object, namespaces.salt(object.key.namespace()));
    }

    /** A lock or pin on {@code object} ended: free it if a forced clear doomed it, else it may be evictable again. */
    void afterUnlock(StoredObject object) {
        if (!object.doomed && object.temporary && !object.isLocked()) {
            removeAndFree(object, EvictionReason.PREFETCH_RELEASED); // loaded from L2 for one request, which is done with it
        } else if (!object.doomed) {
            relinkIfUnlocked(object);
        } else if (object.state == StoredObject.State.READY && object.pins == 0 && object.readers == 0) {
            freeObject(object, EvictionReason.CLEAR);
        }
    }

    void relinkIfUnlocked(StoredObject object) {
        if (!object.isLocked() && !object.doomed && !object.inLru) {
            lists.pushLru(object);
        }
    }

    private long allocateEvicting(long bytes) {
        long offset = allocator.allocate(bytes);
        if (offset >= 0 || policy == EvictionPolicy.NOOP || bytes > allocator.maxObjectBytes()) {
            return offset;
        }
        long slot = SlabAllocator.roundUp(bytes);
        while (offset < 0 && lists.lruTail() != null) {
            StoredObject victim = lists.lruTail();
            if (allocator.slotBytesAt(victim.offset) == slot) {
                removeAndFree(victim, EvictionReason.DEMAND);
            } else {
                // another size class: free the victim's whole region so it can change class
                drainRegion(allocator.regionOf(victim.offset));
            }
            offset = allocator.allocate(bytes);
        }
        return offset;
    }

    private void drainRegion(int region) {
        StoredObject object = lists.regionHead(region);
        while (object != null) {
            StoredObject next = object.regionNext;
            if (!object.isLocked()) {
                removeAndFree(object, EvictionReason.DEMAND);
            }
            object = next;
        }
    }

    // --- counts and checks -----------------------------------------------------------------------

    void publish(StoreCounts counts, LockDeadlines deadlines) {
        counts.publish(objects.size(), deadlines.writeLockedCount(), deadlines.readLockedCount(), pinnedObjects, lists.lruSize(),
                objectBytes, namespaces.size(), allocator, readyRegions);
    }

    /** The invariants of {@link StoreAudit#check}, and the published counts equal a full recount. */
    void check(StoreCounts counts) {
        StoreAudit.check(live(), allocator, lists, objectBytes);
        ObjectStore.Snapshot recounted = recount(counts.poolBytes());
        ObjectStore.Snapshot published = counts.snapshot();
        if (!recounted.equals(published)) {
            throw new IllegalStateException("published counts " + published + " differ from a recount " + recounted);
        }
    }

    ObjectStore.Snapshot recount(long poolBytes) {
        return StoreAudit.recount(objects.values(), live(), allocator, poolBytes, namespaces.size());
    }

    private List<StoredObject> live() {
        List<StoredObject> live = new ArrayList<>(objects.values());
        live.addAll(doomedInUse);
        return live;
    }
}
