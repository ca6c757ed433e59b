package io.lmcache.server.protocol;

import java.util.Collections;
import java.util.EnumSet;
import java.util.Set;

/**
 * The wire limits: every string, bytes, array and map field any op's payload carries, with its declared maximum, in one
 * place beside the {@link Op} table. {@link MsgpackReader} reads such a value only through its field, so the decoder checks
 * the length the msgpack header declares against the field's maximum before it allocates anything for the value, and a value
 * past it fails the request ({@link ProtocolException.Reason#OVER_LIMIT}, {@link ProtocolException#field()}): the server
 * answers it with the op's failure value and counts it by op and field. {@link #of(Op)} says which fields each op reads.
 *
 * <p>The numbers are LMCache's own bounds where it has them, else a generous bound above anything a real client sends (the
 * source says which). A bound only limits one value; what the server keeps after a reply is bounded where it is kept.
 * docs/wire-limits.md is this table ({@code WireLimitsDocTest} keeps the two equal).
 */
public enum WireField {
    OP("op", Kind.STRING, 64,
            "the op frame's E4 name: LMCache's longest op name has 41 bytes; the server drops longer op frames unanswered"),
    FIELD_NAME("field_name", Kind.STRING, 256,
            "a map's field name (IPCCacheServerKey, LayoutHints, EngineGroupInfo, SessionEndInfo, ...): LMCache's longest has 22"
                    + " bytes; unknown names are skipped"),
    MODEL_NAME("model_name", Kind.STRING, 4096 + 256,
            "vLLM's model: a Hugging Face id or a local path (PATH_MAX 4096), plus LMCache's decorations"
                    + " `##lmcache-dcp-layout-v1-d<n>-interleave<m>`, `##lmcache-kv-dtype-v1-<32 hex>`, `##lmcache-rswa-prompt-v1`"
                    + " (LMCache's `_DCP_LAYOUT_NAMESPACE`, `_KV_DTYPE_NAMESPACE`: under 128 bytes together)"),
    REQUEST_ID("request_id", Kind.STRING, 1024,
            "vLLM's request id: `cmpl-`/`chatcmpl-` and a UUID (about 50 bytes), a caller's `X-Request-Id`, or a P/D proxy's"
                    + " id with both addresses in it; 1 KiB is far above all of them"),
    CACHE_SALT("cache_salt", Kind.STRING, 4 * RequestTags.MAX_CHARS,
            "LMCache's ObjectKey and vLLM's `_MAX_CACHE_SALT_LENGTH`: at most 128 characters, of at most 4 UTF-8 bytes each"
                    + " (the character count and the characters are checked after: `bad_salt`)"),
    REQUEST_CONFIGS("request_configs", Kind.MAP, 256,
            "the key's `request_configs`: at most 64 tags (ours, `bad_tag` past it) and LMCache's few load controls"),
    CONFIG_NAME("request_configs_name", Kind.STRING, 1024,
            "a `request_configs` name: `lmcache.tag.` and a tag name of at most 128 characters (request_tags.rst), 4 bytes each;"
                    + " LMCache's other names are short"),
    TAG_VALUE("tag_value", Kind.STRING, 4 * RequestTags.MAX_CHARS,
            "a `lmcache.tag.*` value: at most 128 characters (request_tags.rst), 4 UTF-8 bytes each"),
    KEY("key", Kind.MAP, 64, "IPCCacheServerKey: 10 fields today; unknown ones are skipped"),
    TOKEN_IDS("token_ids", Kind.ARRAY, WireField.MAX_TOKENS,
            "a prompt's tokens: the longest contexts served are 1M tokens (10M advertised for Llama 4 Scout); 10 Mi tokens"),
    KV_GROUPS("kv_groups", Kind.ARRAY, 256,
            "KV-cache groups: `block_ids` lists of STORE/RETRIEVE, `engine_group_infos` (or `group_layouts`) of a registration;"
                    + " a hybrid model has a few"),
    BLOCK_IDS("block_ids", Kind.ARRAY, WireField.MAX_TOKENS,
            "the block ids of one group (or a flat list): a block holds at least one token, so never more than `token_ids`"),
    EVENT_IPC_HANDLE("event_ipc_handle", Kind.BYTES, EventHandle.MAX_BYTES,
            "an event handle: a `cudaIpcEventHandle_t` has 64 bytes, an isolated-IPC timeline-semaphore payload 81 (EventHandle)"),
    KV_CACHE("kv_cache", Kind.ARRAY, WireField.MAX_LAYERS,
            "tensor wrappers of one REGISTER_KV_CACHE, one per layer: the deepest served models have a few hundred layers"),
    WRAPPER_PICKLE("kv_cache_wrapper", Kind.EXTENSION, 16 * 1024,
            "one pickled tensor wrapper (msgpack ext 1): a CpuShmTensorWrapper has about 245 bytes, a CudaIPCWrapper about 400"
                    + " (protocol doc §0.4)"),
    ENGINE_TYPE("engine_type", Kind.STRING, 64, "the serving engine's name: `vllm`, `sglang`"),
    LAYOUT_HINTS("layout_hints", Kind.MAP, 64, "LMCache's LayoutHints: 4 optional keys"),
    KV_LAYOUT("kv_layout", Kind.STRING, 64, "a layout hint: `NHD` or `HND`"),
    GROUP_INFO("engine_group_info", Kind.MAP, 64,
            "LMCache's EngineGroupInfo: 6 core fields, 8 appended for DeepSeek V4.1 (group_view.py) and 2 branch variants"),
    CACHE_ROLE("cache_role", Kind.STRING, 64,
            "an EngineGroupInfo's `cache_role`: vLLM's SparseCacheRole, `sparse` or `indexer` (group_view.py)"),
    LAYER_INDICES("layer_indices", Kind.ARRAY, WireField.MAX_LAYERS, "one group's layers: at most all of `kv_cache`"),
    ENGINE_PAYLOAD("payload", Kind.MAP, 64, "the engine-driven registration: 11 fields"),
    DTYPE("dtype_str", Kind.STRING, 64, "a torch dtype's name: `torch.bfloat16`, `torch.float8_e4m3fn`"),
    END_INFO("end_info", Kind.MAP, 64, "LMCache's SessionEndInfo (a map, or an array of its fields): 2 fields"),
    FINISH_REASON("finish_reason", Kind.STRING, 64, "vLLM's finish reasons: `stop`, `length`, `abort`, `error`"),
    RECORDS("records", Kind.ARRAY, 16 * 1024,
            "REPORT_BLOCK_ALLOCATION records: one per request scheduled in a step (vLLM's `max_num_seqs`: 256 or 1024 by default)"),
    RECORD("record", Kind.MAP, 64, "one allocation record: 3 fields"),
    NEW_BLOCK_IDS("new_block_ids", Kind.ARRAY, WireField.MAX_TOKENS, "a record's new blocks: as `block_ids`"),
    NEW_TOKEN_IDS("new_token_ids", Kind.ARRAY, WireField.MAX_TOKENS, "a record's new tokens: as `token_ids`"),
    COMMIT_DATA("data", Kind.BYTES, 64 * 1024,
            "COMMIT_STORE's `data`: empty on the shared-memory path, a short abort sentinel in newer clients; the pickle data path"
                    + " (whole chunks) is not served here and fails either way");

    /** Tokens of one request: 10 Mi, above the longest context any model advertises (10M). */
    public static final int MAX_TOKENS = 10 << 20;
    /** Layers of one registration. */
    public static final int MAX_LAYERS = 4096;

    /** What a field's maximum counts. */
    public enum Kind {
        STRING("str", "bytes (UTF-8)"),
        BYTES("bin", "bytes"),
        EXTENSION("ext", "bytes"),
        ARRAY("array", "elements"),
        MAP("map", "entries");

        private final String msgpack;
        private final String unit;

        Kind(String msgpack, String unit) {
            this.msgpack = msgpack;
            this.unit = unit;
        }

        /** The msgpack type, for the doc. */
        public String msgpack() {
            return msgpack;
        }

        /** What the maximum counts: bytes, elements or entries. */
        public String unit() {
            return unit;
        }
    }

    private static final Set<WireField> KEY_FIELDS =
            Collections.unmodifiableSet(EnumSet.of(KEY, FIELD_NAME, MODEL_NAME, TOKEN_IDS, REQUEST_ID, CACHE_SALT, REQUEST_CONFIGS,
                    CONFIG_NAME, TAG_VALUE));

    /** Ops whose payloads hold ints, bools and floats only. */
    private static final Set<WireField> SCALARS_ONLY = Collections.unmodifiableSet(EnumSet.noneOf(WireField.class));
    /** Ops of features this server does not provide: never decoded (a distinct instance, for the doc). */
    private static final Set<WireField> NOT_DECODED = Collections.unmodifiableSet(EnumSet.noneOf(WireField.class));

    static {
        // MsgpackReader records the fields a request read in one long, by ordinal
        if (values().length > Long.SIZE) {
            throw new ExceptionInInitializerError("WireField: more than 64 fields do not fit MsgpackReader's bit set");
        }
    }

    private final String wireName;
    private final Kind kind;
    private final int max;
    private final String source;

    WireField(String wireName, Kind kind, int max, String source) {
        this.wireName = wireName;
        this.kind = kind;
        this.max = max;
        this.source = source;
    }

    /** The field's name as the wire (LMCache) spells it; the {@code field} label of the refusal counter. */
    public String wireName() {
        return wireName;
    }

    public Kind kind() {
        return kind;
    }

    /** The largest value accepted: bytes of a str or bin, elements of an array, entries of a map. */
    public int max() {
        return max;
    }

    /** Where the number comes from. */
    public String source() {
        return source;
    }

    /**
     * The bounded fields {@code op}'s payload may carry (the decoder reads no other: the generated test checks it); empty for
     * an op without such a field or one the server does not decode. The switch has no default: a new op does not compile
     * until it is listed here. The op frame's own {@link #OP} is read before the op is known, for every op.
     */
    public static Set<WireField> of(Op op) {
        return switch (op) {
            case LOOKUP, FREE_LOOKUP_LOCKS, PREPARE_STORE, PREPARE_RETRIEVE, COMMIT_RETRIEVE -> KEY_FIELDS;
            case COMMIT_STORE -> with(KEY_FIELDS, COMMIT_DATA);
            case STORE, RETRIEVE -> with(KEY_FIELDS, KV_GROUPS, BLOCK_IDS, EVENT_IPC_HANDLE);
            case RETRIEVE_LAYERWISE -> with(KEY_FIELDS, KV_GROUPS, BLOCK_IDS, EVENT_IPC_HANDLE);
            case REGISTER_LAYERWISE_IPC_EVENT_POOL -> SCALARS_ONLY;
            case QUERY_PREFETCH_STATUS, QUERY_PREFETCH_LOOKUP_HITS, WAIT_PREFETCH_STATUS -> Set.of(REQUEST_ID);
            case END_SESSION -> Collections.unmodifiableSet(EnumSet.of(REQUEST_ID, END_INFO, FIELD_NAME, FINISH_REASON));
            case POLL_KV_EVENTS, SUBSCRIBE_KV_EVENTS -> Set.of(MODEL_NAME);
            case REGISTER_KV_CACHE -> Collections.unmodifiableSet(EnumSet.of(KV_CACHE, WRAPPER_PICKLE, MODEL_NAME, ENGINE_TYPE,
                    LAYOUT_HINTS, FIELD_NAME, KV_LAYOUT, KV_GROUPS, GROUP_INFO, LAYER_INDICES, CACHE_ROLE));
            case REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT ->
                    Collections.unmodifiableSet(EnumSet.of(ENGINE_PAYLOAD, FIELD_NAME, MODEL_NAME, DTYPE, KV_GROUPS));
            case REPORT_BLOCK_ALLOCATION -> Collections.unmodifiableSet(EnumSet.of(MODEL_NAME, RECORDS, RECORD, FIELD_NAME,
                    REQUEST_ID, NEW_BLOCK_IDS, NEW_TOKEN_IDS));
            case PING, UNREGISTER_KV_CACHE, UNREGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT, CLEAR, GET_CHUNK_SIZE, GET_EXPERIMENTAL, NOOP ->
                    SCALARS_ONLY;
            case REGISTER_Q_CACHE, UNREGISTER_Q_CACHE, STORE_Q, CB_REGISTER_ROPE, CB_UNREGISTER_ROPE, CB_RETRIEVE_PRE_COMPUTED,
                    CB_UNIFIED_LOOKUP, CB_PROTOCOL_HANDSHAKE, P2P_LOOKUP_AND_LOCK, P2P_QUERY_LOOKUP_RESULTS, P2P_UNLOCK_OBJECTS -> NOT_DECODED;
        };
    }

    private static Set<WireField> with(Set<WireField> base, WireField... more) {
        EnumSet<WireField> out = EnumSet.copyOf(base);
        out.addAll(Set.of(more));
        return Collections.unmodifiableSet(out);
    }

    /**
     * The table as docs/wire-limits.md carries it (Markdown): the fields with their limits and sources, then each op's
     * fields, in the order of the op table.
     */
    public static String markdownTable() {
        StringBuilder out = new StringBuilder();
        out.append("| field | msgpack | limit | where the number comes from |\n|---|---|---|---|\n");
        for (WireField f : values()) {
            out.append("| `").append(f.wireName).append("` | ").append(f.kind.msgpack).append(" | ").append(f.max).append(' ')
                    .append(f.kind.unit).append(" | ").append(f.source).append(" |\n");
        }
        out.append("\n| op | id | bounded fields |\n|---|---|---|\n");
        out.append("| (every op) | | `").append(OP.wireName).append("` (the op frame) |\n");
        for (Op op : Op.values()) {
            Set<WireField> fields = of(op);
            out.append("| ").append(op.wireName()).append(" | ").append(op.id() == 0 ? "(name only)" : Integer.toString(op.id()))
                    .append(" | ");
            if (fields == NOT_DECODED) {
                out.append("none: not decoded (a feature this server does not provide)");
            } else if (fields.isEmpty()) {
                out.append("none: ints, bools and floats only");
            } else {
                StringBuilder names = new StringBuilder();
                for (WireField f : fields) {
                    names.append(names.isEmpty() ? "" : ", ").append('`').append(f.wireName).append('`');
                }
                out.append(names);
            }
            out.append(" |\n");
        }
        return out.toString();
    }
}
