package io.lmcache.server.storage;

/**
 * Told when a STORE publishes an object (LMCache's {@code on_keys_write_finished}): the L2 store
 * controller's feed. Called under the object store's lock, so it may only look at the object and
 * enqueue it; returning true takes one read hold (a pin) on the object, which keeps it from eviction
 * until the listener gives it back with {@link ObjectStore#unpin}.
 */
@FunctionalInterface
public interface CommitListener {
    /** The published object and its names (model and salt as the store interned them). */
    record Committed(String model, String salt, int kvRank, int group, long hashHi, long hashLo, StoredObject object) {}

    boolean committed(Committed committed);
}
