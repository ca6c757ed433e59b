package io.lmcache.server.tier;

import io.lmcache.server.l2.L2Hash;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.transfer.ObjectShape;

/**
 * The one place an L1 chunk becomes an L2 key (stores and LOOKUP's prefetch alike): LMCache's {@code ObjectKey} fields, the full
 * 256-bit chunk hash, the cache salt, and the object shape's name tag and full format ({@link ObjectShape#l2Tag},
 * {@link ObjectShape#l2Layout}).
 */
final class L2Keys {
    private L2Keys() {}

    static L2Key of(String model, int kvRank, ChunkHash hash, String salt, ObjectShape shape) {
        return new L2Key(model, kvRank, shape.objectGroup(), hash(hash), salt, shape.l2Tag(), shape.l2Layout());
    }

    static L2Hash hash(ChunkHash hash) {
        return new L2Hash(hash.w0(), hash.w1(), hash.w2(), hash.w3());
    }
}
