package io.lmcache.server.storage;

import io.lmcache.server.config.EvictionPolicy;
import io.lmcache.server.storage.StoreCounters.EvictionReason;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;

/**
 * The L1 object store: which chunk objects exist, where they live in the pool, and who holds them.
 *
 * <p>Objects are write-locked while being filled (TTL: a client that never finishes cannot hold
 * memory forever) and read-locked by lookups for the request's readers (TTL too); in-flight copies
 * pin them. Only READY, unlocked, unpinned objects sit on the LRU list, so the eviction victim is
 * always its tail, in O(1). Eviction is by bytes: in the background at the trigger watermark, and
 * on demand inside {@link #reserve} when the pool is full; a request for a size class with no room
 * drains the region of the least recently used object so a whole region changes class, which is
 * why a full pool never fails from fragmentation while anything is evictable.
 *
 * <p>One lock guards everything here and is never held across a copy or a call out.
 */
public final class ObjectStore {
    /** {@link #reserve} outcome: the object is already stored or being stored. */
    public static final StoredObject EXISTS = sentinel();
    /** {@link #reserve} outcome: no memory, even after evicting what could be evicted. */
    public static final StoredObject NO_MEMORY = sentinel();

    /** A read lock taken by a lookup; releasing it after its TTL reclaimed it does nothing. */
    public record ReadLock(StoredObject object, int epoch) {}

    /** What a clear did. */
    public record ClearResult(int removed, long bytes, int deferred) {}

    private final ReentrantLock lock = new ReentrantLock();
    private final SlabAllocator allocator;
    private final NamespaceTable namespaces = new NamespaceTable();
    private final Map<ObjectKey, StoredObject> objects = new HashMap<>();
    private final Set<StoredObject> writing = new LinkedHashSet<>();
    private final Set<StoredObject> readLocked = new HashSet<>();
    /** Removed by a forced clear but still in use: their memory is freed when the use ends. */
    private final Set<StoredObject> doomedInUse = new HashSet<>();
    private final StoredObject[] regionHeads;
    private final EvictionPolicy policy;
    private final long writeTtlNs;
    private final long readTtlNs;
    private final LongSupplier clockNs;
    private final StoreCounters counters;
    private final long poolBytes;
    private StoredObject lruHead;
    private StoredObject lruTail;
    private long objectBytes;

    public ObjectStore(SlabAllocator allocator, long poolBytes, EvictionPolicy policy, long writeTtlNs, long readTtlNs,
            LongSupplier clockNs, StoreCounters counters) {
        this.allocator = allocator;
        this.poolBytes = poolBytes;
        this.policy = policy;
        this.writeTtlNs = writeTtlNs;
        this.readTtlNs = readTtlNs;
        this.clockNs = clockNs;
        this.counters = counters;
        this.regionHeads = new StoredObject[allocator.regionCount()];
    }

    private static StoredObject sentinel() {
        StoredObject sentinel = new StoredObject(new ObjectKey(0, 0, 0, 0, 0), -1, 0, 0, 0);
        sentinel.state = StoredObject.State.FREED;
        return sentinel;
    }

    public StoreCounters counters() {
        return counters;
    }

    /** Regions become allocatable as the pool prepares them. */
    public void addReadyRegion(int region) {
        lock.lock();
        try {
            allocator.addReadyRegion(region);
        } finally {
            lock.unlock();
        }
    }

    // --- writing -------------------------------------------------------------------------------

    /**
     * Reserves and write-locks a new object, evicting on demand when the pool is full. Returns the
     * WRITING object, {@link #EXISTS} when the key is stored or being stored, or {@link #NO_MEMORY}.
     */
    public StoredObject reserve(String model, String salt, int kvRank, int group, long hashHi, long hashLo, long bytes, int format) {
        lock.lock();
        try {
            int namespace = namespaces.peek(model, salt);
            if (namespace != 0 && objects.containsKey(new ObjectKey(namespace, kvRank, group, hashHi, hashLo))) {
                return EXISTS;
            }
            long offset = allocateEvicting(bytes);
            if (offset < 0) {
                counters.allocationFailures.increment();
                return NO_MEMORY;
            }
            namespace = namespaces.acquire(model, salt);
            long nowNs = clockNs.getAsLong();
            StoredObject object = new StoredObject(new ObjectKey(namespace, kvRank, group, hashHi, hashLo), offset, bytes, format, nowNs);
            object.writeDeadlineNs = nowNs + writeTtlNs;
            objects.put(object.key, object);
            writing.add(object);
            linkRegion(object);
            objectBytes += bytes;
            return object;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Publishes a filled object (write lock released, visible to lookups, most recently used).
     * Commit the chunks of one prefix last to first, so the head of a prefix outlives its tail.
     * Returns false when the object was reclaimed meanwhile (TTL, forced clear): its data is gone.
     */
    public boolean commit(StoredObject object) {
        lock.lock();
        try {
            if (object.state != StoredObject.State.WRITING) {
                return false;
            }
            writing.remove(object);
            if (object.doomed) {
                freeObject(object, EvictionReason.CLEAR);
                return false;
            }
            object.state = StoredObject.State.READY;
            counters.writeChunks.increment();
            counters.writeBytes.add(object.bytes);
            relinkIfUnlocked(object);
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** Drops a reservation whose fill failed or will never come. */
    public void abort(StoredObject object) {
        lock.lock();
        try {
            if (object.state == StoredObject.State.WRITING) {
                writing.remove(object);
                removeAndFree(object, EvictionReason.ABORTED_WRITE);
            }
        } finally {
            lock.unlock();
        }
    }

    // --- reading -------------------------------------------------------------------------------

    /**
     * The READY object for a key, pinned for an in-flight copy, or null (missing, still being
     * written, or stored in another layout — counted, and a miss for the caller). Unpin it when the
     * copy is done.
     */
    public StoredObject pinReady(String model, String salt, int kvRank, int group, long hashHi, long hashLo, int format, long bytes) {
        lock.lock();
        try {
            int namespace = namespaces.peek(model, salt);
            if (namespace == 0) {
                return null;
            }
            StoredObject object = objects.get(new ObjectKey(namespace, kvRank, group, hashHi, hashLo));
            if (object == null || object.state != StoredObject.State.READY) {
                return null;
            }
            if (object.format != format || object.bytes != bytes) {
                counters.formatMismatches.increment();
                return null;
            }
            unlinkLru(object);
            object.pins++;
            return object;
        } finally {
            lock.unlock();
        }
    }

    /** Ends an in-flight copy out of {@code object}; {@code read} counts it as a served read. */
    public void unpin(StoredObject object, boolean read) {
        lock.lock();
        try {
            object.pins--;
            if (read) {
                counters.readChunks.increment();
                counters.readBytes.add(object.bytes);
            }
            if (object.doomed) {
                freeIfUnreferenced(object);
            } else {
                relinkIfUnlocked(object);
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * Counts the leading chunks of {@code [fromChunk, toChunk)} whose objects exist for every kv rank
     * {@code 0..worldSize-1} and takes {@code readers} read locks on each of them (into {@code locks});
     * stops at the first miss.
     */
    public int lookupAndLock(String model, String salt, int worldSize, int group, long[] hashes, int fromChunk, int toChunk,
            int readers, List<ReadLock> locks) {
        lock.lock();
        try {
            int namespace = namespaces.peek(model, salt);
            if (namespace == 0) {
                return 0;
            }
            long deadlineNs = clockNs.getAsLong() + readTtlNs;
            int hits = 0;
            StoredObject[] ranks = new StoredObject[worldSize];
            for (int chunk = fromChunk; chunk < toChunk; chunk++) {
                boolean all = true;
                for (int rank = 0; rank < worldSize && all; rank++) {
                    StoredObject object = objects.get(new ObjectKey(namespace, rank, group, hashes[2 * chunk], hashes[2 * chunk + 1]));
                    all = object != null && object.state == StoredObject.State.READY;
                    ranks[rank] = object;
                }
                if (!all) {
                    break;
                }
                hits++;
                if (readers > 0) {
                    for (StoredObject object : ranks) {
                        unlinkLru(object);
                        object.readers += readers;
                        object.readDeadlineNs = Math.max(object.readDeadlineNs, deadlineNs);
                        readLocked.add(object);
                        locks.add(new ReadLock(object, object.readEpoch));
                    }
                }
            }
            return hits;
        } finally {
            lock.unlock();
        }
    }

    /** Releases {@code count} read locks taken by a lookup (ignored when the TTL reclaimed them). */
    public void releaseRead(ReadLock readLock, int count) {
        lock.lock();
        try {
            StoredObject object = readLock.object();
            if (object.readEpoch != readLock.epoch() || object.readers == 0) {
                return;
            }
            object.readers = Math.max(0, object.readers - count);
            if (object.readers == 0) {
                readLocked.remove(object);
                if (object.doomed) {
                    freeIfUnreferenced(object);
                } else {
                    relinkIfUnlocked(object);
                }
            }
        } finally {
            lock.unlock();
        }
    }

    // --- eviction and expiry ---------------------------------------------------------------------

    /**
     * Evicts least recently used objects until {@code targetBytes} are freed or nothing is evictable.
     * A watermark pass can free tens of thousands of objects; it takes the lock for at most
     * {@link #EVICTION_BATCH} of them at a time, so lookups (answered on the socket thread) and
     * stores wait microseconds for it, not milliseconds.
     */
    public long evict(long targetBytes, EvictionReason reason) {
        long freed = 0;
        boolean more = true;
        while (more && freed < targetBytes) {
            lock.lock();
            try {
                for (int batch = 0; batch < EVICTION_BATCH && freed < targetBytes && lruTail != null; batch++) {
                    StoredObject victim = lruTail;
                    freed += victim.bytes;
                    removeAndFree(victim, reason);
                }
                more = lruTail != null;
            } finally {
                lock.unlock();
            }
        }
        return freed;
    }

    static final int EVICTION_BATCH = 256;

    /** Reclaims expired write locks (the object is dropped) and read locks (released). Returns how many. */
    public int sweepExpired() {
        lock.lock();
        try {
            long nowNs = clockNs.getAsLong();
            int reclaimed = 0;
            for (StoredObject object : List.copyOf(writing)) {
                if (object.writeDeadlineNs - nowNs < 0) {
                    writing.remove(object);
                    counters.writeLockExpiries.increment();
                    removeAndFree(object, EvictionReason.EXPIRED_WRITE);
                    reclaimed++;
                }
            }
            for (StoredObject object : List.copyOf(readLocked)) {
                if (object.readDeadlineNs - nowNs < 0) {
                    readLocked.remove(object);
                    object.readers = 0;
                    object.readEpoch++;
                    counters.readLockExpiries.increment();
                    if (object.doomed) {
                        freeIfUnreferenced(object);
                    } else {
                        relinkIfUnlocked(object);
                    }
                    reclaimed++;
                }
            }
            return reclaimed;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Empties the store. Objects being written or read stay unless {@code force}; forced, they
     * disappear at once and their memory is freed when the copy in flight ends (never under it).
     */
    public ClearResult clear(boolean force) {
        lock.lock();
        try {
            int removed = 0;
            int deferred = 0;
            long bytes = 0;
            for (StoredObject object : new ArrayList<>(objects.values())) {
                if (!object.isLocked()) {
                    bytes += object.bytes;
                    removeAndFree(object, EvictionReason.CLEAR);
                    removed++;
                } else if (force) {
                    objects.remove(object.key, object);
                    object.doomed = true;
                    doomedInUse.add(object);
                    unlinkLru(object);
                    if (object.state == StoredObject.State.READY && object.pins == 0) {
                        // only lookup read locks hold it: those locks no longer protect anything
                        readLocked.remove(object);
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
            return new ClearResult(removed, bytes, deferred);
        } finally {
            lock.unlock();
        }
    }

    // --- status ----------------------------------------------------------------------------------

    /** A consistent snapshot of the store, for status, metrics and tests. */
    public record Snapshot(long poolBytes, long readyBytes, long usedBytes, long objectBytes, int objects, int writeLocked,
            int readLocked, int pinned, int evictable, int namespaces, int freeRegions, int readyRegions) {
        public double usageRatio() {
            return poolBytes == 0 ? 0 : (double) usedBytes / poolBytes;
        }
    }

    public Snapshot snapshot() {
        lock.lock();
        try {
            int pinned = 0;
            int evictable = 0;
            for (StoredObject object : objects.values()) {
                pinned += object.pins > 0 ? 1 : 0;
                evictable += object.inLru ? 1 : 0;
            }
            return new Snapshot(poolBytes, allocator.readyBytes(), allocator.usedBytes(), objectBytes, objects.size(), writing.size(),
                    readLocked.size(), pinned, evictable, namespaces.size(), allocator.freeRegions(), allocator.readyRegions());
        } finally {
            lock.unlock();
        }
    }

    /** Used bytes over the pool size (what the watermark compares). */
    public double usageRatio() {
        lock.lock();
        try {
            return (double) allocator.usedBytes() / poolBytes;
        } finally {
            lock.unlock();
        }
    }

    public long poolBytes() {
        return poolBytes;
    }

    public long maxObjectBytes() {
        return allocator.maxObjectBytes();
    }

    /**
     * Checks the store's invariants (tests): live objects never overlap, the allocator's used bytes
     * are exactly the slots of the live objects, every live object is accounted once and sits on the
     * LRU list exactly when it is evictable.
     */
    public void checkInvariants() {
        lock.lock();
        try {
            List<StoredObject> live = new ArrayList<>(objects.values());
            live.addAll(doomedInUse);
            long bytes = 0;
            long slotBytes = 0;
            for (StoredObject object : live) {
                if (object.state == StoredObject.State.FREED) {
                    throw new IllegalStateException("a freed object is still live: " + object);
                }
                if (!allocator.isAllocated(object.offset)) {
                    throw new IllegalStateException("a live object's slot is free in the allocator: " + object);
                }
                bytes += object.bytes;
                slotBytes += allocator.slotBytesAt(object.offset);
                boolean evictable = !object.isLocked() && !object.doomed;
                if (evictable != object.inLru) {
                    throw new IllegalStateException("LRU membership wrong: " + object);
                }
            }
            live.sort(java.util.Comparator.comparingLong(o -> o.offset));
            for (int i = 1; i < live.size(); i++) {
                StoredObject previous = live.get(i - 1);
                if (previous.offset + allocator.slotBytesAt(previous.offset) > live.get(i).offset) {
                    throw new IllegalStateException("objects overlap: " + previous + " and " + live.get(i));
                }
            }
            if (slotBytes != allocator.usedBytes() || live.size() != allocator.liveObjects()) {
                throw new IllegalStateException("allocator counts " + allocator.usedBytes() + " bytes in " + allocator.liveObjects()
                        + " objects, the live objects hold " + slotBytes + " in " + live.size());
            }
            if (bytes != objectBytes) {
                throw new IllegalStateException("object bytes " + bytes + " differ from the accounted " + objectBytes);
            }
            int lruCount = 0;
            for (StoredObject o = lruHead; o != null; o = o.lruNext) {
                if (!o.inLru || o.isLocked() || o.doomed) {
                    throw new IllegalStateException("locked or doomed object on the LRU list: " + o);
                }
                lruCount++;
            }
            long marked = live.stream().filter(o -> o.inLru).count();
            if (marked != lruCount) {
                throw new IllegalStateException("LRU list has " + lruCount + " objects, " + marked + " are marked");
            }
        } finally {
            lock.unlock();
        }
    }

    // --- internals (lock held) -------------------------------------------------------------------

    private long allocateEvicting(long bytes) {
        long offset = allocator.allocate(bytes);
        if (offset >= 0 || policy == EvictionPolicy.NOOP || bytes > allocator.maxObjectBytes()) {
            return offset;
        }
        long slot = SlabAllocator.roundUp(bytes);
        while (offset < 0 && lruTail != null) {
            StoredObject victim = lruTail;
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
        StoredObject object = regionHeads[region];
        while (object != null) {
            StoredObject next = object.regionNext;
            if (!object.isLocked()) {
                removeAndFree(object, EvictionReason.DEMAND);
            }
            object = next;
        }
    }

    private void removeAndFree(StoredObject object, EvictionReason reason) {
        // by identity: after a forced clear the key may already name a newer object
        objects.remove(object.key, object);
        freeObject(object, reason);
    }

    /** Returns the memory; the object must already be out of the map or doomed. */
    private void freeObject(StoredObject object, EvictionReason reason) {
        if (object.state == StoredObject.State.FREED) {
            throw new IllegalStateException("object freed twice: " + object);
        }
        doomedInUse.remove(object);
        unlinkLru(object);
        unlinkRegion(object);
        allocator.free(object.offset);
        namespaces.release(object.key.namespace());
        objectBytes -= object.bytes;
        counters.evicted(reason, object.bytes);
        object.state = StoredObject.State.FREED;
    }

    private void freeIfUnreferenced(StoredObject object) {
        if (object.state == StoredObject.State.READY && object.pins == 0 && object.readers == 0) {
            freeObject(object, EvictionReason.CLEAR);
        }
    }

    private void relinkIfUnlocked(StoredObject object) {
        if (!object.isLocked() && !object.doomed && !object.inLru) {
            object.lruPrev = null;
            object.lruNext = lruHead;
            if (lruHead != null) {
                lruHead.lruPrev = object;
            }
            lruHead = object;
            if (lruTail == null) {
                lruTail = object;
            }
            object.inLru = true;
        }
    }

    private void unlinkLru(StoredObject object) {
        if (!object.inLru) {
            return;
        }
        if (object.lruPrev != null) {
            object.lruPrev.lruNext = object.lruNext;
        } else {
            lruHead = object.lruNext;
        }
        if (object.lruNext != null) {
            object.lruNext.lruPrev = object.lruPrev;
        } else {
            lruTail = object.lruPrev;
        }
        object.lruPrev = null;
        object.lruNext = null;
        object.inLru = false;
    }

    private void linkRegion(StoredObject object) {
        int region = allocator.regionOf(object.offset);
        object.regionPrev = null;
        object.regionNext = regionHeads[region];
        if (regionHeads[region] != null) {
            regionHeads[region].regionPrev = object;
        }
        regionHeads[region] = object;
    }

    private void unlinkRegion(StoredObject object) {
        int region = allocator.regionOf(object.offset);
        if (object.regionPrev != null) {
            object.regionPrev.regionNext = object.regionNext;
        } else if (regionHeads[region] == object) {
            regionHeads[region] = object.regionNext;
        }
        if (object.regionNext != null) {
            object.regionNext.regionPrev = object.regionPrev;
        }
        object.regionPrev = null;
        object.regionNext = null;
    }

    /** Keys of READY objects (tests and debugging). */
    Set<ObjectKey> readyKeys() {
        lock.lock();
        try {
            Set<ObjectKey> keys = new HashSet<>();
            for (StoredObject object : objects.values()) {
                if (object.state == StoredObject.State.READY) {
                    keys.add(object.key);
                }
            }
            return keys;
        } finally {
            lock.unlock();
        }
    }
}
