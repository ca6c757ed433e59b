package io.lmcache.server.storage;

import io.lmcache.server.protocol.RequestTags;
import io.lmcache.server.config.EvictionPolicyName;
import io.lmcache.server.storage.StoreCounters.EvictionReason;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.LongSupplier;

/**
 * Where the store's objects are: the key map, their memory (allocator, namespaces, region lists),
 * and the sizes kept as they change; the {@link EvictionPolicy} it tells of every change of an
 * object's state keeps the eviction order. The object store decides when locks begin and end; this
 * table applies what follows from that. Guarded by the object store's lock.
 */
final class ObjectTable {
    private final SlabAllocator allocator;
    private final EvictionPolicy policy;
    private final StoreCounters counters;
    private final NamespaceTable namespaces = new NamespaceTable();
    /** Each tenant's read-locked bytes, capped (see {@link ReadShares}). */
    final ReadShares readShares = new ReadShares();
    private final Map<ObjectKey, StoredObject> objects = new HashMap<>();
    /** Removed by a forced clear but still in use: their memory is freed when the use ends. */
    private final Set<StoredObject> doomedInUse = new HashSet<>();
    private final RegionLists lists;
    private long objectBytes;
    /** Objects in the map with an in-flight copy (what status calls pinned). */
    private int pinnedObjects;
    private int readyRegions;
    /** Lookups to tell, once the store's lock is released, that a fill they waited for ended. */
    private final List<PendingFills> endedFills = new ArrayList<>();
    /** Lookups waiting on fills, all objects together (at most {@link PendingFills#MAX_WAITING}). */
    private int watchers;
    /** Fills ended since the store last signalled its waiting readers. */
    private int fillsEnded;
    /** The store's listener list, in order (the chunk-lifecycle sampler first); replaced under the store's lock, read also after it. */
    private volatile StoreListener[] listeners;
    private boolean removedAny;

    ObjectTable(SlabAllocator allocator, EvictionPolicyName policy, long poolBytes, StoreCounters counters, LongSupplier clockNs) {
        this.allocator = allocator;
        this.policy = EvictionPolicy.create(policy, poolBytes, namespaces::salt, clockNs);
        this.counters = counters;
        this.lists = new RegionLists(allocator.regionCount());
        this.listeners = new StoreListener[] {counters.lifecycle()};
    }

    /** Appends {@code listener} to the list (under the store's lock). */
    void listen(StoreListener listener) {
        StoreListener[] more = Arrays.copyOf(listeners, listeners.length + 1);
        more[listeners.length] = listener;
        listeners = more;
    }

    /** Takes {@code listener} off the list (under the store's lock): a part that closes hears nothing more. */
    void unlisten(StoreListener listener) {
        listeners = Arrays.stream(listeners).filter(l -> l != listener).toArray(StoreListener[]::new);
    }

    StoreListener[] listeners() {
        return listeners;
    }

    /** An object's key as the store interned it (model, salt and tags of its namespace). */
    ChunkKey keyOf(StoredObject object) {
        return new ChunkKey(model(object), salt(object), tags(object), object.key.kvRank(), object.key.group(), object.key.hash());
    }

    EvictionPolicy policy() {
        return policy;
    }

    void addReadyRegion(int region) {
        if (!allocator.isReady(region)) {
            readyRegions++;
        }
        allocator.addReadyRegion(region);
    }

    int[] nextAllocationRegions(int max) {
        return allocator.nextAllocationRegions(max);
    }

    long maxObjectBytes() {
        return allocator.maxObjectBytes();
    }

    /** The id of a (model, salt, tags) triple, or 0 when no object of it exists. */
    int namespace(String model, String salt, RequestTags tags) {
        return namespaces.peek(model, salt, tags);
    }

    /** Distinct cache salts (tenants) with objects now. */
    int tenantCount() {
        return namespaces.saltCount();
    }

    String model(StoredObject object) {
        return namespaces.model(object.key.namespace());
    }

    String salt(StoredObject object) {
        return namespaces.salt(object.key.namespace());
    }

    RequestTags tags(StoredObject object) {
        return namespaces.tags(object.key.namespace());
    }

    /** The key's object (any state), or null. */
    StoredObject find(ChunkKey key) {
        int namespace = namespaces.peek(key.model(), key.salt(), key.tags());
        return namespace == 0 ? null : get(namespace, key.kvRank(), key.group(), key.hash());
    }

    StoredObject get(int namespace, int kvRank, int group, ChunkHash hash) {
        return objects.get(new ObjectKey(namespace, kvRank, group, hash));
    }

    /** A new WRITING object in fresh memory (evicting on demand), or null when none could be found. */
    StoredObject insert(ChunkKey key, long bytes, int format, long nowNs) {
        long offset;
        policy.storing(key.salt());
        try {
            offset = allocateEvicting(bytes);
        } finally {
            policy.storing(null);
        }
        if (offset < 0) {
            return null;
        }
        int namespace = namespaces.acquire(key.model(), key.salt(), key.tags());
        StoredObject object = new StoredObject(new ObjectKey(namespace, key.kvRank(), key.group(), key.hash()), offset, bytes, format, nowNs);
        objects.put(object.key, object);
        for (StoreListener listener : listeners) {
            listener.reserved(object, key.salt());
        }
        lists.linkRegion(object, allocator.regionOf(offset));
        objectBytes += bytes;
        return object;
    }

    /** The policy's next victim, or null when nothing is evictable (or the policy never evicts). */
    StoredObject victim() {
        return policy.victim();
    }

    /** The next victim of a background pass (see {@link EvictionPolicy#bulkVictim}), or null to stop it. */
    StoredObject bulkVictim() {
        return policy.bulkVictim();
    }

    /** {@code object} was published (WRITING to READY): the policy learns of it, locked until relinked. */
    void ready(StoredObject object) {
        policy.onReady(object);
    }

    /** {@code object} is now read-locked: no longer a victim; {@code access}: a use of it (a lookup's hit). */
    void locked(StoredObject object, boolean access) {
        policy.onLocked(object);
        object.touched |= access;
    }

    void pinned(StoredObject object) {
        policy.onLocked(object);
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
    private List<StoredObject> mapped() {
        return new ArrayList<>(objects.values());
    }

    /** {@link ObjectStore#clear}: unlocked objects go; locked ones too when {@code force} (freed when their use ends). */
    ObjectStore.ClearResult clear(boolean force, LockDeadlines deadlines) {
        int removed = 0;
        int deferred = 0;
        long bytes = 0;
        for (StoredObject object : mapped()) {
            if (!object.isLocked()) {
                bytes += object.bytes;
                removeAndFree(object, EvictionReason.CLEAR);
                removed++;
            } else if (force) {
                doom(object);
                if (object.state == StoredObject.State.READY && object.pins == 0) {
                    // only lookup read locks hold it: those locks no longer protect anything
                    deadlines.readEnded(object);
                    object.readers = 0;
                    object.readEpoch++;
                    bytes += object.bytes;
                    freeObject(object, EvictionReason.CLEAR);
                    removed++;
                } else {
                    deferred++;
                }
            }
        }
        return new ObjectStore.ClearResult(removed, bytes, deferred);
    }

    /** One key's removal, as one object of a clear ({@link ObjectStore#delete}). */
    ObjectStore.DeleteOutcome delete(ChunkKey key, boolean force, LockDeadlines deadlines) {
        StoredObject object = find(key);
        if (object == null || object.doomed || object.state != StoredObject.State.READY && !force) {
            return object == null || object.doomed ? ObjectStore.DeleteOutcome.ABSENT : ObjectStore.DeleteOutcome.LOCKED;
        }
        if (!object.isLocked()) {
            removeAndFree(object, EvictionReason.CLEAR);
            return ObjectStore.DeleteOutcome.DELETED;
        }
        if (!force) {
            return ObjectStore.DeleteOutcome.LOCKED;
        }
        doom(object);
        if (object.state == StoredObject.State.READY && object.pins == 0) {
            deadlines.readEnded(object);
            object.readers = 0;
            object.readEpoch++;
            freeObject(object, EvictionReason.CLEAR);
        }
        return ObjectStore.DeleteOutcome.DELETED;
    }

    /** Out of view at once (forced clear of an object in use); its memory goes when the use ends. */
    void doom(StoredObject object) {
        fillEnded(object);
        objects.remove(object.key, object);
        object.doomed = true;
        doomedInUse.add(object);
        policy.onFreed(object); // out of the policy at once: it can never be a victim again
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
        String model = model(object);
        for (StoreListener listener : listeners) {
            listener.removed(object, model, this::keyOf, reason);
        }
        removedAny = true;
        fillEnded(object);
        doomedInUse.remove(object);
        readShares.unlocked(object);
        policy.onFreed(object);
        lists.unlinkRegion(object, allocator.regionOf(object.offset));
        allocator.free(object.offset);
        namespaces.release(object.key.namespace());
        objectBytes -= object.bytes;
        counters.evicted(reason, object.bytes);
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
        List<PendingFills> waiting = object.takeWatchers();
        if (waiting != null) {
            endedFills.addAll(waiting);
            watchers -= waiting.size();
        }
    }

    /** The end of a lock hold: the listeners hear that this hold's removals are complete. */
    void removalsEnded() {
        if (removedAny) {
            removedAny = false;
            for (StoreListener listener : listeners) {
                listener.removalsEnded();
            }
        }
    }

    /** Whether {@code count} more lookups may wait on fills. */
    boolean mayWatch(int count) {
        return watchers + count <= PendingFills.MAX_WAITING;
    }

    void watched(int count) {
        watchers += count;
    }

    StoreCounters counters() {
        return counters;
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

    /** A copy out of {@code object} served a read (the chunk lifecycle's touch, and the policy's). */
    void read(StoredObject object) {
        object.touched = true;
        String salt = namespaces.salt(object.key.namespace());
        for (StoreListener listener : listeners) {
            listener.read(object, salt, this::keyOf);
        }
    }

    /** {@code object} was loaded from L2 and published as an ordinary object, no reader waiting for it. */
    void loaded(StoredObject object) {
        for (StoreListener listener : listeners) {
            listener.loaded(object, this::keyOf);
        }
    }

    /** A lock or pin on {@code object} ended: free it if a forced clear doomed it, else it may be evictable again. */
    void afterUnlock(StoredObject object) {
        if (object.readers == 0) {
            readShares.unlocked(object);
        }
        if (!object.doomed && object.temporary && !object.isLocked()) {
            removeAndFree(object, EvictionReason.PREFETCH_RELEASED); // loaded from L2 for one request, which is done with it
        } else if (!object.doomed) {
            relinkIfUnlocked(object);
        } else if (object.state == StoredObject.State.READY && object.pins == 0 && object.readers == 0) {
            freeObject(object, EvictionReason.CLEAR);
        }
    }

    /** An unlocked READY object becomes the policy's candidate again, told whether it was read meanwhile. */
    void relinkIfUnlocked(StoredObject object) {
        if (!object.isLocked() && !object.doomed && !policy.isEvictable(object)) {
            policy.onUnlocked(object, object.touched);
            object.touched = false;
        }
    }

    private long allocateEvicting(long bytes) {
        long offset = allocator.allocate(bytes);
        if (offset >= 0 || bytes > allocator.maxObjectBytes()) {
            return offset;
        }
        long slot = SlabAllocator.roundUp(bytes);
        StoredObject victim;
        while (offset < 0 && (victim = policy.victim()) != null) {
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
        counts.publish(new StoreCounts.ObjectStates(objects.size(), deadlines.writeLockedCount(), deadlines.readLockedCount(), pinnedObjects,
                policy.evictableCount()), objectBytes, namespaces.size(), allocator, readyRegions);
        policy.publish();
    }

    /** The invariants of {@link StoreAudit#check}, and the published counts equal a full recount. */
    void check(StoreCounts counts) {
        StoreAudit.check(live(), allocator, policy, objectBytes);
        long shared = 0;
        for (StoredObject object : live()) {
            if ((object.readShare != null) != (object.readers > 0)) {
                throw new IllegalStateException("read share out of step with the readers: " + object);
            }
            shared += object.readShare != null ? object.bytes : 0;
        }
        readShares.check(shared);
        ObjectStore.Snapshot recounted = recount(counts.poolBytes());
        ObjectStore.Snapshot published = counts.snapshot();
        if (!recounted.equals(published)) {
            throw new IllegalStateException("published counts " + published + " differ from a recount " + recounted);
        }
    }

    ObjectStore.Snapshot recount(long poolBytes) {
        return StoreAudit.recount(objects.values(), live(), allocator, policy, poolBytes, namespaces.size());
    }

    private List<StoredObject> live() {
        List<StoredObject> live = new ArrayList<>(objects.values());
        live.addAll(doomedInUse);
        return live;
    }
}
