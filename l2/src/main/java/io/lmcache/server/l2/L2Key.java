package io.lmcache.server.l2;

import java.util.HexFormat;

/**
 * The identity of one object in L2 (hybrid-and-l2.md §B.6): model, kv rank, object group, the
 * object's layout format, the 128-bit chunk hash and the cache salt ("" when none). Its wire form,
 * the key every adapter stores under, is {@code model@rank08x@og_hex@f{format hex}@hash_hex[@salt]}.
 *
 * <p>The kv rank is LMCache's packed one ({@link #packKvRank}): world size, global rank, local world
 * size and local rank, so deployments of one model at different tensor-parallel sizes never share
 * a key. The format field is our own addition to LMCache's key (the int {@code KvLayout.format()}
 * gives an L1 object: piece order, dtype, block size of HND layouts): objects of one model and size
 * in another layout are other keys, never loaded as each other. Our chunk hashes are our own (a
 * SHA-256 prefix chain), so these keys never match a Python LMCache server's anyway.
 */
public record L2Key(String model, int kvRank, int objectGroup, int format, long hashHi, long hashLo, String salt) {
    /** The largest world size a packed kv rank holds (8 bits); larger deployments have no L2. */
    public static final int MAX_WORLD_SIZE = 0xFF;
    private static final HexFormat HEX = HexFormat.of();

    public L2Key {
        salt = salt == null ? "" : salt;
    }

    /**
     * LMCache's packed kv rank, {@code (world_size << 24) | (global_rank << 16) | (local_world_size << 8) | local_rank}, on one
     * node: the local world size is the world size and the local rank the rank. Each field is 8 bits.
     */
    public static int packKvRank(int worldSize, int rank) {
        if (worldSize < 1 || worldSize > MAX_WORLD_SIZE || rank < 0 || rank >= worldSize) {
            throw new IllegalArgumentException("kv rank " + rank + " of world size " + worldSize + " does not pack into 8-bit fields");
        }
        return worldSize << 24 | rank << 16 | worldSize << 8 | rank;
    }

    /** The chunk hash as LMCache's {@code chunk_hash.hex()}: 32 lower-case hex digits, high half first. */
    public String hashHex() {
        return HEX.toHexDigits(hashHi) + HEX.toHexDigits(hashLo);
    }

    /** {@code model@rank08x@og_hex@f{format hex}@hash_hex[@salt]}. */
    public String wireKey() {
        return model + "@" + HEX.toHexDigits(kvRank) + "@" + Integer.toHexString(objectGroup) + "@f" + Integer.toHexString(format) + "@"
                + hashHex() + (salt.isEmpty() ? "" : "@" + salt);
    }
}
