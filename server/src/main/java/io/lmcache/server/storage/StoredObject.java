package io.lmcache.server.storage;

import java.util.ArrayList;
import java.util.List;

/**
 * One object in the pool and its locks. All fields are guarded by the object store's lock; the
 * bytes at {@code offset} are only touched by whoever holds the write lock (while WRITING) or a
 * pin or read lock (while READY).
 */
public final class StoredObject {
    enum State {
        /** Reserved and being filled; invisible to lookups; write lock with a deadline. */
        WRITING,
        /** Published: readable, evictable when unlocked. */
        READY,
        /** Gone (evicted, cleared, aborted); the memory is back in the allocator. */
        FREED
    }

    final ObjectKey key;
    final long offset;
    final long bytes;
    final int format;
    final long createdNs;
    State state = State.WRITING;
    long writeDeadlineNs;
    /** Lookup read locks (expire at {@link #readDeadlineNs}). */
    int readers;
    long readDeadlineNs;
    /** Bumped when expired read locks are reclaimed, so stale releases are ignored. */
    int readEpoch;
    /** In-flight copies out of the object; never expire (a copy is bounded by the request). */
    int pins;
    /** The eviction policy's state for this object (its {@link PolicyNode}); only the policy reads it. */
    Object policySlot;
    /** Read (a lookup's read lock, a served copy) since it was last evictable: the policy's "touched". */
    boolean touched;
    StoredObject regionPrev;
    StoredObject regionNext;
    /** Removed by a forced clear while locked: freed when the last lock goes, never published. */
    boolean doomed;
    /**
     * Filled by another process (an engine-driven worker writing into the shared pool): an expired write lock frees it, since
     * the worker may be gone. A fill of this process (a GPU or host copy, an L2 load) always ends in a publish or an abort,
     * and may still be writing: its expired write lock only dooms it, and that end frees it (never memory a fill writes into).
     */
    boolean externalFill;
    /** Loaded from L2 for a lookup: freed when its last read lock or pin goes (not with --l2-prefetch-policy retain). */
    boolean temporary;
    /** The tenant whose read locks count this object (while it has readers), or null. */
    ReadShares.Tally readShare;
    /** Lookups waiting for this object's fill to end (see {@link PendingFills}); null almost always. */
    private List<PendingFills> watchers;

    StoredObject(ObjectKey key, long offset, long bytes, int format, long nowNs) {
        this.key = key;
        this.offset = offset;
        this.bytes = bytes;
        this.format = format;
        this.createdNs = nowNs;
    }

    /** Whether it is a published object of a writer, not a loaded copy (under the store's lock): what a removal announces. */
    public boolean published() {
        return state == State.READY && !temporary;
    }

    public ObjectKey key() {
        return key;
    }

    /** Byte offset of the object in the pool. */
    public long offset() {
        return offset;
    }

    public long bytes() {
        return bytes;
    }

    /** The layout the bytes are in (see {@code transfer.KvLayout.format()}); readers of another layout treat it as a miss. */
    public int format() {
        return format;
    }

    void watch(PendingFills lookup) {
        if (watchers == null) {
            watchers = new ArrayList<>(2);
        }
        watchers.add(lookup);
    }

    /** The lookups to tell that the fill ended (under the store's lock; they are told after it is released). */
    List<PendingFills> takeWatchers() {
        List<PendingFills> taken = watchers;
        watchers = null;
        return taken;
    }

    boolean isLocked() {
        return state != State.READY || readers > 0 || pins > 0;
    }

    @Override
    public String toString() {
        return "StoredObject[" + key + " @" + offset + "+" + bytes + " " + state + " readers=" + readers + " pins=" + pins + "]";
    }
}
