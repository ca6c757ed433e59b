package io.lmcache.server.l2;

import java.util.HexFormat;
import java.util.Objects;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The identity of one object in L2 (hybrid-and-l2.md §A.6, §B.6): LMCache's {@code ObjectKey} (model, packed kv rank, object
 * group, the 32-byte chunk hash, the cache salt: "" when none), plus {@code layoutTag} for objects whose bytes are not in
 * LMCache's object layout. Its wire form, the key every adapter stores under, is LMCache's {@code _object_key_to_string}:
 * {@code model@{kv_rank:08x}@{object_group_id:x}@{chunk_hash.hex()}[@cache_salt]}
 * (LMCache/LMCache {@code lmcache/v1/distributed/l2_adapters/native_connector_l2_adapter.py}, index id 71300106843 @0b43a455), so a
 * Python LMCache server and this one name the same chunk alike.
 *
 * <p>The kv rank is LMCache's packed one ({@link #packKvRank}): deployments of one model at different tensor-parallel sizes never
 * share a key. {@code layoutTag} 0 means the object is LMCache's object layout ({@code KV_2LTD} segments, one per kernel group):
 * the name is LMCache's exactly. Every worker layout's objects are (HND blocks are transposed as they are copied, issue 27), so
 * the server writes 0 except in one fallback: a GPU whose loaded copy kernel cannot transpose keeps head-major blocks in their
 * block order, and those objects carry the server's layout format here, named apart ({@code @f{tag hex}} before the hash) so
 * neither server ever reads the other's bytes in another order.
 *
 * <p>{@code layout} describes the object's full format (dtype, heads, head size, block layout, groups) for adapters that can keep it
 * beside the bytes where LMCache ignores it (fs_native's extended attribute); "" when unknown. It is no part of the identity:
 * equality and hashing leave it out, so a key read back from a name (no layout) equals the key it was stored under.
 */
public record L2Key(String model, int kvRank, int objectGroup, L2Hash hash, String salt, int layoutTag, String layout) {
    /** The largest world size a packed kv rank holds (8 bits); larger deployments have no L2. */
    public static final int MAX_WORLD_SIZE = 0xFF;
    private static final HexFormat HEX = HexFormat.of();

    public L2Key {
        Objects.requireNonNull(model, "model");
        Objects.requireNonNull(hash, "hash");
        salt = salt == null ? "" : salt;
        layout = layout == null ? "" : layout;
    }

    /** A key of an object in LMCache's layout, its format unknown (tests, names read back). */
    public static L2Key of(String model, int kvRank, int objectGroup, L2Hash hash, String salt) {
        return new L2Key(model, kvRank, objectGroup, hash, salt, 0, "");
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

    /** The chunk hash as LMCache's {@code chunk_hash.hex()}: 64 lower-case hex digits. */
    public String hashHex() {
        return hash.hex();
    }

    /** {@code {kv_rank:08x}}: eight hex digits, the packed rank read unsigned. */
    public String kvRankHex() {
        return HEX.toHexDigits(kvRank);
    }

    /** {@code @{object_group_id:x}} and, for an object not in LMCache's layout, {@code @f{tag hex}}: the fields between rank and hash. */
    String groupFields() {
        String group = "@" + Integer.toHexString(objectGroup);
        return layoutTag == 0 ? group : group + "@f" + Integer.toHexString(layoutTag);
    }

    /** {@code model@{kv_rank:08x}@{og:x}@{hash hex}[@salt]} (with {@code @f{tag}} after the group for a foreign layout). */
    public String wireKey() {
        return model + "@" + kvRankHex() + groupFields() + "@" + hashHex() + (salt.isEmpty() ? "" : "@" + salt);
    }

    /** Model, rank, group, our layout tag (foreign layouts only), hash, salt: LMCache forbids '@' in model and salt. */
    private static final Pattern WIRE = Pattern.compile("([^@]+)@([0-9a-f]{8})@([0-9a-f]{1,8})(?:@f([0-9a-f]{1,8}))?@([0-9a-f]{64})(?:@([^@]+))?",
            Pattern.DOTALL);

    /** The key whose {@link #wireKey} is {@code wire}, or null when it is none (another version's name, a stranger's object). */
    public static L2Key parseWireKey(String wire) {
        Matcher m = WIRE.matcher(wire);
        if (!m.matches()) {
            return null;
        }
        L2Key key = new L2Key(m.group(1), Integer.parseUnsignedInt(m.group(2), 16), Integer.parseUnsignedInt(m.group(3), 16),
                L2Hash.parse(m.group(5)), m.group(6) == null ? "" : m.group(6), m.group(4) == null ? 0 : Integer.parseUnsignedInt(m.group(4), 16), "");
        return wire.equals(key.wireKey()) ? key : null;
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof L2Key k && kvRank == k.kvRank && objectGroup == k.objectGroup && layoutTag == k.layoutTag
                && hash.equals(k.hash) && model.equals(k.model) && salt.equals(k.salt);
    }

    @Override
    public int hashCode() {
        return ((hash.hashCode() * 31 + model.hashCode()) * 31 + salt.hashCode()) * 31 + (kvRank ^ objectGroup << 8 ^ layoutTag << 16);
    }
}
