package io.lmcache.server.storage;

import io.lmcache.server.protocol.RequestTags;

/**
 * The name of one chunk object at the store's API, LMCache's {@code ObjectKey} plus the request's tags:
 * model, cache salt, tags (the tenant), kv rank, object group and the chunk's 32-byte hash. The store
 * interns model, salt and tags inside ({@link ObjectKey}), so a key of another salt or another tag set
 * never meets this one.
 *
 * <p>For L2 names: {@code hash().hex()} is LMCache's {@code chunk_hash.hex()} and {@link #saltSuffix()}
 * the trailing {@code @{cache_salt}} field of its fs_native names and Valkey keys.
 */
public record ChunkKey(String model, String salt, RequestTags tags, int kvRank, int group, ChunkHash hash) {
    public ChunkKey {
        salt = salt == null ? "" : salt;
        tags = tags == null ? RequestTags.NONE : tags;
    }

    /** A key without tags. */
    public ChunkKey(String model, String salt, int kvRank, int group, ChunkHash hash) {
        this(model, salt, RequestTags.NONE, kvRank, group, hash);
    }

    /** An untagged key whose hash is {@code (w0, w1, 0, 0)}: made-up hashes for tests and benchmarks. */
    public static ChunkKey of(String model, String salt, int kvRank, int group, long w0, long w1) {
        return new ChunkKey(model, salt, kvRank, group, new ChunkHash(w0, w1, 0, 0));
    }

    /**
     * What LMCache appends to an L2 name for the salt: {@code "@" + cache_salt}, or nothing for the empty salt, so unsalted
     * names keep their four fields ({@code fs_key_codec.object_key_to_filename}, {@code valkey_l2_adapter}).
     */
    public String saltSuffix() {
        return salt.isEmpty() ? "" : "@" + salt;
    }

    /**
     * Whether the key carries request tags. LMCache names tagged keys only in its pure-Python {@code fs} adapter and refuses a
     * tagged store or L2 lookup on every other adapter (fs_native, Valkey included: request_tags.rst), so an L2 that cannot
     * name tags must skip these keys rather than let two tag sets share one name.
     */
    public boolean hasTags() {
        return !tags.isEmpty();
    }
}
