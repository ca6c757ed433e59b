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

        /** The chunk's 32-byte LMCache hash; {@code hash().hex()} is its L2 names' hash field. */
        public ChunkHash hash() {
            return key.hash();
        }

        /** LMCache's trailing {@code @{cache_salt}} field of L2 names, "" without a salt ({@link ChunkKey#saltSuffix}). */
        public String saltSuffix() {
            return key.saltSuffix();
        }

    }

    boolean committed(Committed committed);
}
