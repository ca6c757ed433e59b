package io.lmcache.server.storage;

import java.util.Collection;
import java.util.Comparator;
import java.util.List;

/** The object store's self-checks (tests and benchmarks): they walk every object, so never on a serving path. */
final class StoreAudit {
    private StoreAudit() {}

    /**
     * Live objects never overlap, the allocator's used bytes are exactly their slots, every one is
     * accounted once and is the policy's candidate exactly when it is evictable, and the policy's own
     * invariant holds. Lock held.
     */
    static void check(List<StoredObject> live, SlabAllocator allocator, EvictionPolicy policy, long objectBytes) {
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
            if (evictable != policy.isEvictable(object)) {
                throw new IllegalStateException(policy.name().flagValue() + " membership wrong: " + object);
            }
        }
        live.sort(Comparator.comparingLong(o -> o.offset));
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
        policy.check();
        long marked = live.stream().filter(policy::isEvictable).count();
        if (marked != policy.evictableCount()) {
            throw new IllegalStateException(policy.name().flagValue() + " counts " + policy.evictableCount() + " evictable objects, "
                    + marked + " are");
        }
    }

    /**
     * The store's sizes counted from the objects themselves: {@code mapped} are those lookups can
     * find, {@code live} adds the ones a forced clear doomed while in use. Lock held.
     */
    static ObjectStore.Snapshot recount(Collection<StoredObject> mapped, List<StoredObject> live, SlabAllocator allocator,
            EvictionPolicy policy, long poolBytes, int namespaces) {
        int writeLocked = 0;
        int readLocked = 0;
        long objectBytes = 0;
        for (StoredObject object : live) {
            writeLocked += object.state == StoredObject.State.WRITING ? 1 : 0;
            readLocked += object.readers > 0 ? 1 : 0;
            objectBytes += object.bytes;
        }
        int pinned = 0;
        int evictable = 0;
        for (StoredObject object : mapped) {
            pinned += object.pins > 0 ? 1 : 0;
            evictable += policy.isEvictable(object) ? 1 : 0;
        }
        return new ObjectStore.Snapshot(poolBytes, allocator.readyBytes(), allocator.usedBytes(), objectBytes, mapped.size(), writeLocked,
                readLocked, pinned, evictable, namespaces, allocator.freeRegions(), allocator.readyRegions());
    }
}
