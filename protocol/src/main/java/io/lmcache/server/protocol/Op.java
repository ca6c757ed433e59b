package io.lmcache.server.protocol;

import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/**
 * LMCache's frozen operation table (protocol doc §4.1): ids 1..34 never change; operations added
 * later travel as their snake_case name. Both forms map to the same constant.
 */
public enum Op {
    REGISTER_KV_CACHE(1),
    UNREGISTER_KV_CACHE(2),
    REGISTER_Q_CACHE(3),
    UNREGISTER_Q_CACHE(4),
    STORE_Q(5),
    STORE(6),
    RETRIEVE(7),
    LOOKUP(8),
    QUERY_PREFETCH_STATUS(9),
    WAIT_PREFETCH_STATUS(10),
    QUERY_PREFETCH_LOOKUP_HITS(11),
    FREE_LOOKUP_LOCKS(12),
    END_SESSION(13),
    REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT(14),
    UNREGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT(15),
    PREPARE_STORE(16),
    COMMIT_STORE(17),
    PREPARE_RETRIEVE(18),
    COMMIT_RETRIEVE(19),
    CLEAR(20),
    GET_CHUNK_SIZE(21),
    PING(22),
    REPORT_BLOCK_ALLOCATION(23),
    NOOP(24),
    CB_REGISTER_ROPE(25),
    CB_UNREGISTER_ROPE(26),
    CB_RETRIEVE_PRE_COMPUTED(27),
    CB_UNIFIED_LOOKUP(28),
    P2P_LOOKUP_AND_LOCK(29),
    P2P_QUERY_LOOKUP_RESULTS(30),
    P2P_UNLOCK_OBJECTS(31),
    GET_EXPERIMENTAL(32),
    CB_PROTOCOL_HANDSHAKE(33),
    POLL_KV_EVENTS(34),
    /** No frozen id: LMCache's streaming op travels only as its name (kv-events.md §2). */
    SUBSCRIBE_KV_EVENTS(0);

    public static final int MAX_ID = 34;
    private static final Op[] BY_ID = new Op[MAX_ID + 1];
    private static final Map<String, Op> BY_NAME = new HashMap<>();

    static {
        for (Op op : values()) {
            if (op.id > 0) {
                BY_ID[op.id] = op;
            }
            BY_NAME.put(op.wireName, op);
        }
        // CacheBlend v3 names (protocol doc §4.1: aliases of 25..27)
        BY_NAME.put("cb_register_rope_v3", CB_REGISTER_ROPE);
        BY_NAME.put("cb_unregister_rope_v3", CB_UNREGISTER_ROPE);
        BY_NAME.put("cb_retrieve_pre_computed_v3", CB_RETRIEVE_PRE_COMPUTED);
    }

    private final int id;
    private final String wireName;

    Op(int id) {
        this.id = id;
        this.wireName = name().toLowerCase(Locale.ROOT);
    }

    /** The frozen legacy id; 0 for an op that only has a name. */
    public int id() {
        return id;
    }

    /** The E4 string name (lowercase of the enum name). */
    public String wireName() {
        return wireName;
    }

    /** The op for a legacy id, or null when the id is not in the table. */
    public static Op fromId(long id) {
        return id >= 1 && id <= MAX_ID ? BY_ID[(int) id] : null;
    }

    /** The op for an E4 string name, or null when the name is unknown. */
    public static Op fromName(String name) {
        return BY_NAME.get(name);
    }
}
