package io.lmcache.server.storage;

/**
 * An object a STORE published, with its key (model and salt as the store interned them): what the L2 write-through queues
 * after its {@link StoreListener#committed} took a read hold, and what a window commit pins.
 */
public record Committed(ChunkKey key, StoredObject object) {
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
