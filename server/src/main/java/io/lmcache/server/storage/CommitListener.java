package io.lmcache.server.storage;

/**
 * Told when a STORE publishes an object (LMCache's {@code on_keys_write_finished}): the L2 store
 * controller's feed. Called under the object store's lock, so it may only look at the object and
 * enqueue it; returning true takes one read hold (a pin) on the object, which keeps it from eviction
 * until the listener gives it back with {@link ObjectStore#unpin}.
 */
@FunctionalInterface
public interface CommitListener {
    /** The published object and its key (model and salt as the store interned them). */
    record Committed(ChunkKey key, StoredObject object) {
        public String model() {
            return key.model();
        }

        public String salt() {
            return key.salt();
        }

        public int kvRank() {
            return key.kvRank();
        }

        public int group() {
            return key.group();
        }

        /** The high half of today's 128-bit hash (the L2 key's). */
        public long hashHi() {
            return key.hash().w0();
        }

        public long hashLo() {
            return key.hash().w1();
        }
    }

    boolean committed(Committed committed);
}
