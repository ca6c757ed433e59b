package io.lmcache.server.protocol;

import java.util.HashMap;
import java.util.Locale;
import java.util.Map;

/**
 * LMCache's frozen operation table (protocol doc §4.1): ids 1..34 never change; operations added
 * later travel as their snake_case name. Both forms map to the same constant. Each op also carries
 * the most payload frames any client version sends with it (protocol doc §5), the one place that
 * count is written: the server's op table reads it, a frame beyond it is counted and ignored.
 */
public enum Op {
    REGISTER_KV_CACHE(1, 7),
    UNREGISTER_KV_CACHE(2, 1),
    REGISTER_Q_CACHE(3, Op.NOT_DECODED),
    UNREGISTER_Q_CACHE(4, Op.NOT_DECODED),
    STORE_Q(5, Op.NOT_DECODED),
    STORE(6, 4),
    RETRIEVE(7, 5),
    LOOKUP(8, 2),
    QUERY_PREFETCH_STATUS(9, 1),
    WAIT_PREFETCH_STATUS(10, 2),
    QUERY_PREFETCH_LOOKUP_HITS(11, 1),
    FREE_LOOKUP_LOCKS(12, 2),
    END_SESSION(13, 2),
    REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT(14, 1),
    UNREGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT(15, 1),
    PREPARE_STORE(16, 2),
    COMMIT_STORE(17, 3),
    PREPARE_RETRIEVE(18, 2),
    COMMIT_RETRIEVE(19, 2),
    CLEAR(20, 1),
    GET_CHUNK_SIZE(21, 0),
    PING(22, 1),
    REPORT_BLOCK_ALLOCATION(23, 3),
    NOOP(24, 0),
    CB_REGISTER_ROPE(25, Op.NOT_DECODED),
    CB_UNREGISTER_ROPE(26, Op.NOT_DECODED),
    CB_RETRIEVE_PRE_COMPUTED(27, Op.NOT_DECODED),
    CB_UNIFIED_LOOKUP(28, Op.NOT_DECODED),
    P2P_LOOKUP_AND_LOCK(29, Op.NOT_DECODED),
    P2P_QUERY_LOOKUP_RESULTS(30, Op.NOT_DECODED),
    P2P_UNLOCK_OBJECTS(31, Op.NOT_DECODED),
    GET_EXPERIMENTAL(32, 0),
    CB_PROTOCOL_HANDSHAKE(33, Op.NOT_DECODED),
    POLL_KV_EVENTS(34, 3),
    /** No frozen id: LMCache's streaming op travels only as its name (kv-events.md §2). */
    SUBSCRIBE_KV_EVENTS(0, 4),
    /**
     * vLLM's layer-wise MP connector, sent once after REGISTER: no frozen id, so it travels as its name (LMCache's
     * {@code protocols/layerwise.py@3ed3c8ba} {@code REQUEST_NAMES}; new ops use their string name,
     * {@code transport/zmq_impl/wire.py@0be164ed}). docs/sglang.md says what this server answers.
     */
    REGISTER_LAYERWISE_IPC_EVENT_POOL(0, 1),
    /** The layer-wise RETRIEVE (same payloads as RETRIEVE, replies {@code (payload, is_final, succeeded)}): name only, as above. */
    RETRIEVE_LAYERWISE(0, 5);

    public static final int MAX_ID = 34;
    /** {@link #maxPayloads} of an op this server never decodes (named qualified above: a constant, so no forward reference). */
    public static final int NOT_DECODED = -1;
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
    private final int maxPayloads;
    private final String wireName;

    Op(int id, int maxPayloads) {
        this.id = id;
        this.maxPayloads = maxPayloads;
        this.wireName = name().toLowerCase(Locale.ROOT);
    }

    /**
     * The most payload frames any client version sends with this op; {@link #NOT_DECODED} for the ops of features this
     * server leaves out (it never decodes them).
     */
    public int maxPayloads() {
        return maxPayloads;
    }

    /**
     * Whether a client sends this op while it starts, before its engine asks for any KV (protocol doc §1): the scheduler's
     * and every worker's GET_CHUNK_SIZE, the worker's GET_EXPERIMENTAL, then its registration (the layer-wise event pool's
     * ask after it), a DEALER's NOOP probe, the heartbeat PINGs, a KV-event subscriber's SUBSCRIBE. A vLLM worker sends its
     * GET_CHUNK_SIZE before it loads its model (its KV connector is made in {@code init_device}, before {@code load_model}:
     * {@code vllm/v1/worker/gpu_worker.py}), and a REGISTER waits for the GPU warm-up; the start-up warm-up's background
     * rounds go on beside these and stop at the first request of any other op.
     */
    public boolean sentAtClientStart() {
        return switch (this) {
            case GET_CHUNK_SIZE, GET_EXPERIMENTAL, NOOP, PING, REGISTER_KV_CACHE, REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT,
                    REGISTER_LAYERWISE_IPC_EVENT_POOL, SUBSCRIBE_KV_EVENTS -> true;
            default -> false;
        };
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
