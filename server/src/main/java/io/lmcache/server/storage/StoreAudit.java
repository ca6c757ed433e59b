package io.lmcache.server.storage;

import java.util.Collection;
import java.util.Comparator;
import java.util.List;

/** The object store's self-checks (tests and benchmarks): they walk every object, so never on a serving path. */
final class StoreAudit {
    private StoreAudit() {}

    /**
     * Live objects never overlap, the allocator's used bytes are exactly their slots, every one is
     * accounted once and sits on the LRU list exactly when it is evictable. Lock held.
     */
    static void check(List<StoredObject> live, SlabAllocator allocator, EvictionLists lists, long objectBytes) {
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
        int lruCount = 0;
        for (StoredObject o = lists.lruHead(); o != null; o = o.lruNext) {
            if (!o.inLru || o.isLocked() || o.doomed) {
                throw new IllegalStateException("locked or doomed object on the LRU list: " + o);
            }
            lruCount++;
        }
        long marked = live.stream().filter(o -> o.inLru).count();
        if (marked != lruCount || lruCount != lists.lruSize()) {
            throw new IllegalStateException("LRU list has " + lruCount + " objects (size " + lists.lruSize() + "), " + marked
                    + " are marked");
        }
    }

    /**
     * The store's sizes counted from the objects themselves: {@code mapped} are those lookups can
     * find, {@code live} adds the ones a forced clear doomed while in use. Lock held.
     */
    static ObjectStore.Snapshot recount(Collection<StoredObject> mapped, List<StoredObject> live, SlabAllocator allocator,
            long poolBytes, int namespaces) {
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
            evictable += object.inLru ? 1 : 0;
        }
        return new ObjectStore.Snapshot(poolBytes, allocator.readyBytes(), allocator.usedBytes(), objectBytes, mapped.size(), writeLocked,
                readLocked, pinned, evictable, namespaces, allocator.freeRegions(), allocator.readyRegions());
    }
}
