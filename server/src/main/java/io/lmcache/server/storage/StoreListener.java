package io.lmcache.server.storage;

import io.lmcache.server.storage.StoreCounters.EvictionReason;

/**
 * One entry of the object store's ordered listener list (LMCache's {@code L1ManagerListener}): what happens to L1's objects,
 * told to every entry in the order they were added. The store's own chunk-lifecycle sampler is always first; the composition
 * adds the KV-event recorder and the L2 write-through after it.
 *
 * <p>Under the store's lock (so an entry may only look at the object, copy names and enqueue; never block, never call the
 * store back): {@link #reserved}, {@link #committed}, {@link #read}, {@link #removed} and {@link #removalsEnded}. Right after,
 * with the lock released, on the committing thread: {@link #stored}. The eviction policy is not an entry: it decides (victims,
 * admission) rather than hears, and the store calls it directly.
 */
public interface StoreListener {
    /** How an entry names a committed object, only when it needs to (building the key costs lookups under the lock). */
    interface Keys {
        ChunkKey keyOf(StoredObject object);
    }

    /** What a batch of commits came from, for the entries that announce it (null: a writer that says nothing about it). */
    interface Origin {}

    /**
     * A writer's reserved objects, committed last to first by {@link ObjectStore#commitAll}; {@code committed[i]} says whether
     * {@code objects[i]} (null: none reserved there) was still reserved and is now published.
     */
    record Batch(StoredObject[] objects, boolean[] committed, Origin origin) {}

    /** Under the lock: {@code object} was reserved to be written; {@code salt} is the request's cache salt. */
    default void reserved(StoredObject object, String salt) { }

    /**
     * Under the lock: a STORE published {@code object}. Returning true takes one read hold (a pin), which keeps it from eviction
     * until the entry gives it back with {@link ObjectStore#unpin} (the L2 write-through's hold while it copies).
     */
    default boolean committed(StoredObject object, Keys keys) {
        return false;
    }

    /**
     * Under the lock: a copy out of {@code object} served a read; {@code salt} is its namespace's cache salt, {@code keys} names it
     * in full for an entry that needs more.
     */
    default void read(StoredObject object, String salt, Keys keys) { }

    /**
     * Under the lock: {@code object}, loaded from L2 with no reader waiting (a warm prefetch: LMCache's {@code finish_write}), was
     * published as an ordinary object; its removal is announced as any published object's ({@link StoredObject#published}).
     */
    default void loaded(StoredObject object, Keys keys) { }

    /**
     * Under the lock: {@code object} (of {@code model}) leaves L1 for {@code reason}; its state is still the one it had.
     * {@code keys} names it in full (salt, tags) for an entry that needs more than the model.
     */
    default void removed(StoredObject object, String model, Keys keys, EvictionReason reason) { }

    /** Under the lock, once per lock hold that removed anything, before the release. */
    default void removalsEnded() { }

    /** Right after a {@link ObjectStore#commitAll}, the lock released, on the committing thread. */
    default void stored(Batch batch) { }
}
