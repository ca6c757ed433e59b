package io.lmcache.server.storage;

import io.lmcache.server.config.EvictionPolicyName;
import io.lmcache.server.storage.StoreCounters.EvictionReason;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;

/**
 * The L1 object store: which chunk objects exist, where they live in the pool, and who holds them.
 *
 * <p>Objects are write-locked while being filled (TTL: a client that never finishes cannot hold
 * memory forever) and read-locked by lookups for the request's readers (TTL too); in-flight copies
 * pin them. Only READY, unlocked, unpinned objects are the {@link EvictionPolicy}'s candidates, and it
 * names the victim in O(1) (LRU by default; ARC, S3FIFO, per-tenant quotas, or never). Eviction is by
 * bytes: in the background at the trigger watermark, and on demand inside {@link #reserve} when the
 * pool is full; a request for a size class with no room drains the region of the victim so a whole
 * region changes class, which is why a full pool never fails from fragmentation while anything is
 * evictable.
 *
 * <p>One lock guards everything here, no other class takes it, and it is never held across a copy
 * or a call out. This class decides when locks begin and end; {@link ObjectTable} keeps the objects
 * and their memory, the policy their order, {@link StoreLookups} walks prefixes for the lookups,
 * {@link LockDeadlines} keeps the lock TTLs, {@link StoreCounts} the sizes status and the gauges
 * read without the lock.
 */
public final class ObjectStore {
    /** {@link #reserve} outcome: the object is already stored or being stored. */
    public static final StoredObject EXISTS = sentinel();
    /** {@link #reserve} outcome: no memory, even after evicting what could be evicted. */
    public static final StoredObject NO_MEMORY = sentinel();
    /** {@link #pinReady}'s format for a copy that takes the object as it is (a window commit's copy to L2). */
    public static final int ANY_LAYOUT = -1;

    /** A read lock taken by a lookup; releasing it after its TTL reclaimed it does nothing. */
    public record ReadLock(StoredObject object, int epoch) {}

    /** What a clear did. */
    public record ClearResult(int removed, long bytes, int deferred) {}

    private final ReentrantLock lock = new ReentrantLock();
    /** Signalled when fills end: a RETRIEVE that meets a chunk being written waits on it (see {@link #pinReady}). */
    private final Condition fillsEnded = lock.newCondition();
    private final ObjectTable table;
    private final StoreLookups lookups;
    private final LockDeadlines deadlines = new LockDeadlines();
    private final StoreCounts counts;
    private final long writeTtlNs;
    private final long readTtlNs;
    private final LongSupplier clockNs;
    private final StoreCounters counters;
    private final long poolBytes;

    public ObjectStore(SlabAllocator allocator, long poolBytes, EvictionPolicyName policy, long writeTtlNs, long readTtlNs,
            LongSupplier clockNs, StoreCounters counters) {
        this.poolBytes = poolBytes;
        this.writeTtlNs = writeTtlNs;
        this.readTtlNs = readTtlNs;
        this.clockNs = clockNs;
        this.counters = counters;
        this.table = new ObjectTable(allocator, policy, poolBytes, counters, clockNs);
        this.lookups = new StoreLookups(this, table);
        this.counts = new StoreCounts(poolBytes);
    }

    private static StoredObject sentinel() {
        StoredObject sentinel = new StoredObject(new ObjectKey(0, 0, 0, new ChunkHash(0, 0, 0, 0)), -1, 0, 0, 0);
        sentinel.state = StoredObject.State.FREED;
        return sentinel;
    }

    public StoreCounters counters() {
        return counters;
    }

    /**
     * Appends {@code listener} to the store's ordered listener list ({@link StoreListener}: which events run under this lock
     * and which right after); the composition adds its entries before the first request.
     */
    public void listen(StoreListener listener) {
        lock.lock();
        try {
            table.listen(listener);
        } finally {
            unlock();
        }
    }

    /** Takes {@code listener} off the list: a part that closes (the L2 tier) hears no more commits. */
    public void unlisten(StoreListener listener) {
        lock.lock();
        try {
            table.unlisten(listener);
        } finally {
            unlock();
        }
    }

    /** Regions become allocatable as the pool prepares them. */
    public void addReadyRegion(int region) {
        lock.lock();
        try {
            table.addReadyRegion(region);
        } finally {
            unlock();
        }
    }

    /**
     * The regions new objects will be allocated from next, first first, at most {@code max}: the partly used regions (any size
     * class) and the top of the free regions' stack. The GPU warm-up pins these before a first GPU worker's REGISTER reply,
     * so its first STOREs do not wait for their region's pin (issue 30).
     */
    public int[] nextAllocationRegions(int max) {
        lock.lock();
        try {
            return table.nextAllocationRegions(max);
        } finally {
            unlock();
        }
    }

    // --- writing -------------------------------------------------------------------------------
    // Every call that names an object's size and layout takes them as (bytes, format), reads and writes alike.

    /**
     * Reserves and write-locks a new object, evicting on demand when the pool is full. Returns the
     * WRITING object, {@link #EXISTS} when the key is stored or being stored, or {@link #NO_MEMORY}.
     */
    public StoredObject reserve(ChunkKey key, long bytes, int format) {
        return reserve(key, bytes, format, StoreCounters.DURING_L1_STORE);
    }

    /** {@link #reserve} for someone other than a STORE: {@code during} labels a failure ({@link StoreCounters#DURING_L2_PREFETCH}). */
    public StoredObject reserve(ChunkKey key, long bytes, int format, String during) {
        return reserve(key, bytes, format, during, false);
    }

    /**
     * {@link #reserve} for a fill by another process (an engine-driven worker writing into the shared pool, see
     * {@link StoredObject#externalFill}). Such a reservation never blocks another writer: LMCache stages each writer's object
     * apart ({@code L1Manager}: "writers with different tags may stage the same key at the same time"), so a reserve that meets
     * one supersedes it (out of sight, its memory kept until its owner's commit, abort or TTL), and the first owner's commit
     * answers false.
     */
    public StoredObject reserveExternal(ChunkKey key, long bytes, int format) {
        return reserve(key, bytes, format, StoreCounters.DURING_L1_STORE, true);
    }

    private StoredObject reserve(ChunkKey key, long bytes, int format, String during, boolean external) {
        lock.lock();
        try {
            StoredObject existing = table.find(key);
            if (existing != null && external && existing.externalFill && existing.state == StoredObject.State.WRITING) {
                table.doom(existing);
                existing = null;
            }
            if (existing != null) {
                if (existing.isLocked() || (existing.format == format && existing.bytes == bytes)) {
                    return EXISTS;
                }
                // the engine restarted with another dtype, backend or block size: the old layout's object would answer
                // every LOOKUP, fail every RETRIEVE and, touched by those lookups, never be evicted
                table.removeAndFree(existing, EvictionReason.REPLACED_LAYOUT);
            }
            long nowNs = clockNs.getAsLong();
            StoredObject object = table.insert(key, bytes, format, nowNs);
            if (object == null) {
                counters.allocationFailed(during, key.model());
                return NO_MEMORY;
            }
            object.writeDeadlineNs = nowNs + writeTtlNs;
            object.externalFill = external;
            deadlines.writeLocked(object);
            return object;
        } finally {
            unlock();
        }
    }

    /**
     * Publishes a writer's reserved objects (nulls skipped), last to first: the one place of the rule that a prefix is committed
     * last chunk first, so the policy keeps the head of a prefix longer than its tail (objects of one chunk are adjacent,
     * {@code objects[j * groups + g]}). Then, the lock released, every listener hears the batch with {@code origin}. True when
     * every object was still reserved.
     */
    public boolean commitAll(StoredObject[] objects, StoreListener.Origin origin) {
        boolean[] committed = commitEach(objects, origin);
        for (int i = 0; i < objects.length; i++) {
            if (objects[i] != null && !committed[i]) {
                return false;
            }
        }
        return true;
    }

    /** {@link #commitAll}, answering per object whether it was still reserved and is now published (the HTTP KV bytes API's prefix). */
    public boolean[] commitEach(StoredObject[] objects, StoreListener.Origin origin) {
        boolean[] committed = new boolean[objects.length];
        for (int i = objects.length - 1; i >= 0; i--) {
            if (objects[i] != null) {
                committed[i] = commit(objects[i]);
            }
        }
        StoreListener.Batch batch = new StoreListener.Batch(objects, committed, origin);
        for (StoreListener listener : table.listeners()) {
            listener.stored(batch);
        }
        return committed;
    }

    /**
     * Publishes a filled object (write lock released, visible to lookups, most recently used); {@link #commitAll} commits a
     * writer's objects in their order. Returns false when the object was reclaimed meanwhile (TTL, forced clear): its data is gone.
     */
    public boolean commit(StoredObject object) {
        lock.lock();
        try {
            if (!publish(object)) {
                return false;
            }
            for (StoreListener listener : table.listeners()) {
                if (listener.committed(object, table::keyOf)) {
                    table.pinned(object); // the listener's read hold (the L2 write's): not evictable until it is given back
                }
            }
            table.relinkIfUnlocked(object);
            return true;
        } finally {
            unlock();
        }
    }

    /** WRITING to READY (under the lock); false, with the object freed, when a forced clear doomed it meanwhile. */
    private boolean publish(StoredObject object) {
        if (object.state != StoredObject.State.WRITING) {
            return false;
        }
        deadlines.writeEnded(object);
        if (object.doomed) {
            table.freeObject(object, EvictionReason.CLEAR);
            return false;
        }
        table.fillEnded(object);
        object.state = StoredObject.State.READY;
        table.ready(object);
        counters.writeChunks.increment();
        counters.writeBytes.add(object.bytes);
        return true;
    }

    /** {@code readers} read locks on a READY object until {@code deadlineNs} at the earliest (under the lock); {@code access}: a use. */
    ReadLock readLock(StoredObject object, int readers, long deadlineNs, boolean access) {
        table.locked(object, access);
        table.readShares.locked(object, table.salt(object));
        object.readers += readers;
        object.readDeadlineNs = Math.max(object.readDeadlineNs, deadlineNs);
        deadlines.readLocked(object);
        return new ReadLock(object, object.readEpoch);
    }

    /** A read-lock deadline starting now. */
    long readDeadlineNs() {
        return clockNs.getAsLong() + readTtlNs;
    }

    /**
     * The owner of an external reservation is gone or unreachable (its connection closed): the key is released at once (a clean
     * miss, and free for another writer), but the memory stays allocated until the owner's abort, commit or the write TTL, since
     * a worker that only lost its connection may still be writing into it.
     */
    public void disown(StoredObject object) {
        lock.lock();
        try {
            if (object.externalFill && object.state == StoredObject.State.WRITING && !object.doomed) {
                table.doom(object);
            }
        } finally {
            unlock();
        }
    }

    /** Drops a reservation whose fill failed or will never come. */
    public void abort(StoredObject object) {
        lock.lock();
        try {
            if (object.state == StoredObject.State.WRITING) {
                deadlines.writeEnded(object);
                table.removeAndFree(object, EvictionReason.ABORTED_WRITE);
            }
        } finally {
            unlock();
        }
    }

    // --- reading -------------------------------------------------------------------------------

    /**
     * The READY object for a key, pinned for an in-flight copy, or null (missing, or stored in another layout — counted,
     * and a miss for the caller). Unpin it when the copy is done. An object still being written (a STORE replied to before
     * its copy ended) is waited for, at most {@code fillWaitNs}: the read is ordered after that write, and a write that
     * fails is a miss.
     */
    public StoredObject pinReady(ChunkKey key, long bytes, int format, long fillWaitNs) {
        lock.lock();
        try {
            StoredObject object = table.find(key);
            // another process's fill is never waited for (it may never end): a miss, as LMCache's staging objects are unreadable
            if (object != null && object.state == StoredObject.State.WRITING && !object.externalFill && fillWaitNs > 0) {
                object = awaitFill(object, key, fillWaitNs);
            }
            if (object == null || object.state != StoredObject.State.READY) {
                return null;
            }
            if (format != ANY_LAYOUT && (object.format != format || object.bytes != bytes)) {
                counters.formatMismatches.increment();
                return null;
            }
            table.pinned(object);
            return object;
        } finally {
            unlock();
        }
    }

    /**
     * Whether any object is being written (a STORE's copy, an L2 load, an engine's fill): while none is, no {@link #pinReady}
     * can have a write to wait for that began before this call.
     */
    public boolean writesInFlight() {
        lock.lock();
        try {
            return deadlines.writeLockedCount() > 0;
        } finally {
            unlock();
        }
    }

    /** {@link #pinReady} without waiting for a write in flight. */
    public StoredObject pinReady(ChunkKey key, long bytes, int format) {
        return pinReady(key, bytes, format, 0);
    }

    /** The key's object once {@code writing}'s fill has ended (or the wait ran out); under the lock, released while waiting. */
    private StoredObject awaitFill(StoredObject writing, ChunkKey key, long waitNs) {
        counters.readsAfterWrites.increment();
        long leftNs = Math.min(waitNs, writeTtlNs + TimeUnit.SECONDS.toNanos(1));
        StoredObject object = writing;
        try {
            while (object != null && object.state == StoredObject.State.WRITING && leftNs > 0) {
                leftNs = fillsEnded.awaitNanos(leftNs);
                object = table.find(key);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // shutdown: a miss
            return null;
        }
        return object;
    }

    /** Ends an in-flight copy out of {@code object}; {@code read} counts it as a served read. */
    public void unpin(StoredObject object, boolean read) {
        lock.lock();
        try {
            table.unpinned(object);
            if (read) {
                counters.readChunks.increment();
                counters.readBytes.add(object.bytes);
                table.read(object);
            }
            table.afterUnlock(object);
        } finally {
            unlock();
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
                deadlines.readEnded(object);
                table.afterUnlock(object);
            }
        } finally {
            unlock();
        }
    }

    // --- lookups and the L2 tier ----------------------------------------------------------------

    /**
     * Counts the leading chunks of {@code [fromChunk, toChunk)} of {@code prefix} stored for every kv rank and takes
     * {@code readers} read locks on each of them (into {@code locks}); see {@code StoreLookups}.
     */
    public int lookupAndLock(PrefixKeys prefix, int fromChunk, int toChunk, int readers, List<ReadLock> locks, PendingFills fills) {
        lock.lock();
        try {
            return lookups.lookupAndLock(prefix, fromChunk, toChunk, readers, locks, fills);
        } finally {
            unlock();
        }
    }

    /** Marks which chunks of {@code [fromChunk, toChunk)} of {@code prefix} are readable for every kv rank; no locks taken. */
    public void presence(PrefixKeys prefix, int fromChunk, int toChunk, boolean[] present, PendingFills fills) {
        lock.lock();
        try {
            lookups.presence(prefix, fromChunk, toChunk, present, fills);
        } finally {
            unlock();
        }
    }

    /** Marks in {@code ready} which of {@code keys} have a READY object (the L2 prefetch asks only for the others). */
    public void readyKeys(ChunkKey[] keys, boolean[] ready) {
        lock.lock();
        try {
            for (int i = 0; i < keys.length; i++) {
                StoredObject object = table.find(keys[i]);
                ready[i] = object != null && object.state == StoredObject.State.READY;
            }
        } finally {
            unlock();
        }
    }

    /** Takes {@code readers} read locks on the key's READY object (into {@code locks}); false when there is none. */
    public boolean lockReady(ChunkKey key, int readers, List<ReadLock> locks) {
        lock.lock();
        try {
            StoredObject object = table.find(key);
            if (object == null || object.state != StoredObject.State.READY) {
                return false;
            }
            if (readers > 0) {
                locks.add(readLock(object, readers, readDeadlineNs(), true));
            }
            return true;
        } finally {
            unlock();
        }
    }

    /**
     * Publishes an object filled from L2 and takes {@code readers} read locks on it at once (LMCache's
     * {@code finish_write_and_reserve_read}), so it is never visible unlocked; {@code temporary}: freed when the last lock goes.
     * Null when the reservation was reclaimed meanwhile. With no readers nothing would ever release it, so it is kept as an
     * ordinary object (LMCache's {@code finish_write}, a warm prefetch's: its listeners hear it as {@link StoreListener#loaded}).
     * The locks are the load's own request, not a second use (the policy sees it as new).
     */
    public ReadLock commitLoaded(StoredObject object, int readers, boolean temporary) {
        lock.lock();
        try {
            if (!publish(object)) {
                return null;
            }
            if (readers <= 0) {
                table.relinkIfUnlocked(object);
                table.loaded(object);
                return null;
            }
            object.temporary = temporary;
            return readLock(object, readers, readDeadlineNs(), false);
        } finally {
            unlock();
        }
    }

    /** Removes an object every L2 adapter now holds ({@code skip_l1}), unless someone reads or locks it; true when removed. */
    public boolean dropIfIdle(StoredObject object) {
        lock.lock();
        try {
            if (object.state != StoredObject.State.READY || object.isLocked() || object.doomed) {
                return false;
            }
            table.removeAndFree(object, EvictionReason.MOVED_TO_L2);
            return true;
        } finally {
            unlock();
        }
    }

    /** What {@link #delete} did to one key. */
    public enum DeleteOutcome { DELETED, LOCKED, ABSENT }

    /**
     * Removes the object of {@code key} ({@code DELETE /cache/objects}). One being read or written stays unless {@code force}; forced,
     * it goes as in a forced {@link #clear}: out of sight at once, its memory freed when the use ends.
     */
    public DeleteOutcome delete(ChunkKey key, boolean force) {
        lock.lock();
        try {
            return table.delete(key, force, deadlines);
        } finally {
            unlock();
        }
    }

    // --- eviction and expiry ---------------------------------------------------------------------

    /**
     * Evicts the policy's victims until {@code targetBytes} are freed or nothing is evictable.
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
                for (int batch = 0; batch < EVICTION_BATCH && freed < targetBytes; batch++) {
                    StoredObject victim = reason == EvictionReason.WATERMARK ? table.bulkVictim() : table.victim();
                    if (victim == null) {
                        more = false;
                        break;
                    }
                    freed += victim.bytes;
                    table.removeAndFree(victim, reason);
                }
            } finally {
                unlock();
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
            for (StoredObject object : deadlines.takeExpiredWrites(nowNs)) {
                counters.writeLockExpiries.increment();
                if (object.externalFill) {
                    table.removeAndFree(object, EvictionReason.EXPIRED_WRITE);
                } else {
                    // a fill of ours may still be writing into it: out of sight now, freed by its publish or abort, and
                    // write-locked (counted so) until then, with no deadline left to expire again
                    table.doom(object);
                    object.writeDeadlineNs = nowNs + Long.MAX_VALUE / 2;
                    deadlines.writeLocked(object);
                }
                reclaimed++;
            }
            for (StoredObject object : deadlines.takeExpiredReads(nowNs)) {
                object.readers = 0;
                object.readEpoch++;
                counters.readLockExpiries.increment();
                table.afterUnlock(object);
                reclaimed++;
            }
            return reclaimed;
        } finally {
            unlock();
        }
    }

    /**
     * Empties the store. Objects being written or read stay unless {@code force}; forced, they
     * disappear at once and their memory is freed when the copy in flight ends (never under it).
     */
    public ClearResult clear(boolean force) {
        lock.lock();
        try {
            return table.clear(force, deadlines);
        } finally {
            unlock();
        }
    }

    // --- the policy ------------------------------------------------------------------------------

    /**
     * {@code --tenant-read-lock-share}: one tenant's (cache salt's) LOOKUP read locks hold at most {@code share} of the pool;
     * 1 (the default here) leaves them uncapped. Call before the first LOOKUP.
     */
    public void setReadLockShare(double share) {
        lock.lock();
        try {
            table.readShares.setShare(share, poolBytes);
        } finally {
            unlock();
        }
    }

    /** The bytes of objects read-locked for {@code salt}'s tenant now (tests). */
    long readLockedBytes(String salt) {
        lock.lock();
        try {
            return table.readShares.lockedBytes(salt);
        } finally {
            unlock();
        }
    }

    /** The eviction policy running. */
    public EvictionPolicyName policy() {
        return table.policy().name();
    }

    /** Whether the policy ever evicts (all but noop): the background controller runs only then. */
    public boolean evicts() {
        return table.policy().name() != EvictionPolicyName.NOOP;
    }

    /** The policy's numbers for {@code /status}; without the lock (what the last change published). */
    public Map<String, Object> policyStatus() {
        return table.policy().status();
    }

    /**
     * Sets the soft quota of {@code tenant} (a cache salt; {@code _default} names the empty one), or removes it with a
     * negative {@code quotaBytes}; false when the policy keeps no quotas (only IsolatedLRU does).
     */
    public boolean setTenantQuota(String tenant, long quotaBytes) {
        lock.lock();
        try {
            if (!(table.policy() instanceof TenantLruPolicy tenants)) {
                return false;
            }
            tenants.setQuota(tenant, quotaBytes < 0 ? TenantLruPolicy.NO_QUOTA : quotaBytes);
            return true;
        } finally {
            unlock();
        }
    }

    /** Every tenant with objects or a quota, by name; empty unless the policy is IsolatedLRU. Without the lock. */
    public List<TenantUsage> tenantUsage() {
        return table.policy() instanceof TenantLruPolicy tenants ? tenants.usage() : List.of();
    }

    // --- status ----------------------------------------------------------------------------------

    /** The store's sizes, for status, metrics and tests (see {@link StoreCounts} for how consistent). */
    public record Snapshot(long poolBytes, long readyBytes, long usedBytes, long objectBytes, int objects, int writeLocked,
            int readLocked, int pinned, int evictable, int namespaces, int freeRegions, int readyRegions) {
        public double usageRatio() {
            return poolBytes == 0 ? 0 : (double) usedBytes / poolBytes;
        }
    }

    /** O(1) and without the lock: what the last change under the lock published. */
    public Snapshot snapshot() {
        return counts.snapshot();
    }

    /** Used bytes over the pool size (what the watermark compares); O(1), without the lock. */
    public double usageRatio() {
        return (double) counts.usedBytes() / poolBytes;
    }

    /** Bytes of the pool holding objects; O(1), without the lock. */
    public long usedBytes() {
        return counts.usedBytes();
    }

    /** Objects lookups can find; O(1), without the lock. */
    public int objectCount() {
        return counts.objects();
    }

    /** Bytes of the pool prepared and allocatable; O(1), without the lock. */
    public long readyBytes() {
        return counts.readyBytes();
    }

    public long poolBytes() {
        return poolBytes;
    }

    public long maxObjectBytes() {
        return table.maxObjectBytes();
    }

    /**
     * Checks the store's invariants (tests): live objects never overlap, the allocator's used bytes
     * are exactly the slots of the live objects, every live object is accounted once and is the
     * policy's candidate exactly when it is evictable, the policy's own invariant holds, and the
     * published counts equal a full recount.
     */
    public void checkInvariants() {
        lock.lock();
        try {
            table.check(counts);
        } finally {
            unlock();
        }
    }

    /** The sizes counted by walking every object (tests: the O(1) counts must equal this). */
    Snapshot recount() {
        lock.lock();
        try {
            return table.recount(poolBytes);
        } finally {
            unlock();
        }
    }

    /** Every locked method ends here: the counts are republished before anyone else can change the store. */
    private void unlock() {
        table.publish(counts, deadlines);
        table.removalsEnded();
        if (table.takeFillsEnded() > 0) {
            fillsEnded.signalAll();
        }
        PendingFills[] ended = table.takeEndedWatchers();
        lock.unlock();
        if (ended != null) {
            PendingFills.tell(ended); // runs on: whichever thread ended the fills
        }
    }
}
