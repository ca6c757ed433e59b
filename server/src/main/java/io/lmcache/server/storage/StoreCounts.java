package io.lmcache.server.storage;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * The store's sizes, republished by the lock holder at the end of every change, so status, the
 * gauges and {@code /healthcheck} read them in O(1) and never wait on the store's lock (inline
 * LOOKUPs on the socket thread take it). Release stores cost no fence on the hot path. Fields are
 * read one at a time, so a snapshot taken while the store changes may mix values from either side
 * of that change; each field on its own is a value the store really had.
 */
final class StoreCounts {
    private static final int OBJECTS = 0;
    private static final int WRITE_LOCKED = 1;
    private static final int READ_LOCKED = 2;
    private static final int PINNED = 3;
    private static final int EVICTABLE = 4;
    private static final int OBJECT_BYTES = 5;
    private static final int USED_BYTES = 6;
    private static final int READY_BYTES = 7;
    private static final int NAMESPACES = 8;
    private static final int FREE_REGIONS = 9;
    private static final int READY_REGIONS = 10;

    private final AtomicLongArray values = new AtomicLongArray(11);
    private final long poolBytes;

    /** The store's objects: all of them, and how many are in each state (a locked or pinned one is not evictable). */
    record ObjectStates(int all, int writeLocked, int readLocked, int pinned, int evictable) {}

    StoreCounts(long poolBytes) {
        this.poolBytes = poolBytes;
    }

    /** Lock held: what the store holds now. */
    void publish(ObjectStates objects, long objectBytes, int namespaces, SlabAllocator allocator, int readyRegions) {
        values.lazySet(OBJECTS, objects.all());
        values.lazySet(WRITE_LOCKED, objects.writeLocked());
        values.lazySet(READ_LOCKED, objects.readLocked());
        values.lazySet(PINNED, objects.pinned());
        values.lazySet(EVICTABLE, objects.evictable());
        values.lazySet(OBJECT_BYTES, objectBytes);
        values.lazySet(USED_BYTES, allocator.usedBytes());
        values.lazySet(READY_BYTES, allocator.readyBytes());
        values.lazySet(NAMESPACES, namespaces);
        values.lazySet(FREE_REGIONS, allocator.freeRegions());
        values.lazySet(READY_REGIONS, readyRegions);
    }

    long poolBytes() {
        return poolBytes;
    }

    long usedBytes() {
        return values.get(USED_BYTES);
    }

    long readyBytes() {
        return values.get(READY_BYTES);
    }

    int objects() {
        return (int) values.get(OBJECTS);
    }

    ObjectStore.Snapshot snapshot() {
        return new ObjectStore.Snapshot(poolBytes, values.get(READY_BYTES), values.get(USED_BYTES), values.get(OBJECT_BYTES),
                (int) values.get(OBJECTS), (int) values.get(WRITE_LOCKED), (int) values.get(READ_LOCKED), (int) values.get(PINNED),
                (int) values.get(EVICTABLE), (int) values.get(NAMESPACES), (int) values.get(FREE_REGIONS), (int) values.get(READY_REGIONS));
    }
}
