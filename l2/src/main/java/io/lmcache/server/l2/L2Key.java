package io.lmcache.server.l2;

import java.util.HexFormat;

/**
 * The identity of one object in L2 (hybrid-and-l2.md §B.6): model, kv rank, object group, the
 * 128-bit chunk hash and the cache salt ("" when none). Its wire form, the key every adapter
 * stores under, is {@code model@rank08x@og_hex@hash_hex[@salt]}. Our chunk hashes are our own
 * (a SHA-256 prefix chain), so these keys never match a Python LMCache server's.
 */
public record L2Key(String model, int kvRank, int objectGroup, long hashHi, long hashLo, String salt) {
    private static final HexFormat HEX = HexFormat.of();

    public L2Key {
        salt = salt == null ? "" : salt;
    }

    /** The chunk hash as LMCache's {@code chunk_hash.hex()}: 32 lower-case hex digits, high half first. */
    public String hashHex() {
        return HEX.toHexDigits(hashHi) + HEX.toHexDigits(hashLo);
    }

    /** {@code model@rank08x@og_hex@hash_hex[@salt]}. */
    public String wireKey() {
        return model + "@" + HEX.toHexDigits(kvRank) + "@" + Integer.toHexString(objectGroup) + "@" + hashHex()
                + (salt.isEmpty() ? "" : "@" + salt);
    }
}
