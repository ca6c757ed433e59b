package io.lmcache.server.protocol;

import io.lmcache.server.protocol.ProtocolException.Reason;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.msgpack.core.ExtensionTypeHeader;
import org.msgpack.value.ValueType;

/**
 * Decodes the payload frames of one request into its {@link Request} record. Arity is lenient, as
 * the reference client versions differ: missing trailing frames take their defaults, extra frames
 * are ignored (the caller caps the frames at the op's maximum and counts the rest). Frames that a
 * request cannot do without, or that hold the wrong type, raise {@link ProtocolException}. There is
 * one public method per op; the server's op table refers to them as {@link PayloadDecoder}s.
 *
 * <p>Not thread-safe: one decoder per thread, reused.
 */
public final class RequestDecoder {
    /** msgpack extension type of a pickled KV-tensor wrapper (protocol doc §3.2). */
    public static final byte WRAPPER_EXT_TYPE = 1;
    public static final int EVENT_HANDLE_BYTES = 64;

    private static final Request.GetChunkSize GET_CHUNK_SIZE = new Request.GetChunkSize();
    private static final Request.GetExperimental GET_EXPERIMENTAL = new Request.GetExperimental();
    private static final Request.Noop NOOP = new Request.Noop();
    private static final Request.Ping UNTRACKED_PING = new Request.Ping(true, 0);
    private static final byte[] NO_EVENT = new byte[EVENT_HANDLE_BYTES];
    /** Keys' token ids decoded recently, by every decoder of the process: a prompt is decoded once, not once per request. */
    private static final IntArrayMemo TOKEN_IDS = new IntArrayMemo();

    /** One op's decoder, as a method reference such as {@code RequestDecoder::lookup}: reads frames[from..to). */
    @FunctionalInterface
    public interface PayloadDecoder<R extends Request> {
        R decode(RequestDecoder decoder, byte[][] frames, int from, int to) throws ProtocolException;
    }

    private final Payloads payloads = new Payloads();
    private final MsgpackReader opReader = new MsgpackReader();

    /** Token ids copied from a recently decoded key instead of decoded, since start ({@code /status token_ids_reused}). */
    public static long tokenIdsReused() {
        return TOKEN_IDS.reusedValues();
    }

    /**
     * Whether {@code tokenIds} is an array the decoder hands to every request of the same token ids (read-only, {@link
     * IntArrayMemo}): a memo of the same tokens may keep it by reference and know it again by identity.
     */
    public static boolean sharesTokenIds(int[] tokenIds) {
        return TOKEN_IDS.shares(tokenIds);
    }

    /** The {@link WireField}s the last request decoded with a payload read, one bit per ordinal (the generated limits test). */
    long fieldsRead() {
        return payloads.fieldsRead();
    }

    /** The op of a request's op frame: a msgpack int (frozen id) or a str (E4 name); null when unknown. */
    public Op decodeOp(byte[] opFrame) throws ProtocolException {
        MsgpackReader r = opReader.reset(opFrame);
        ValueType type = r.nextType("op");
        Op op;
        if (type == ValueType.INTEGER) {
            op = Op.fromId(r.readLong("op"));
        } else if (type == ValueType.STRING) {
            op = Op.fromName(r.readString(WireField.OP));
        } else {
            throw new ProtocolException(Reason.WRONG_TYPE, "op: expected an int or a str, got " + type.name().toLowerCase(Locale.ROOT));
        }
        r.expectEnd("op");
        return op;
    }

    // --- per-op decoders: each reads frames[from..to), the payload frames of one request --------

    public Request.GetChunkSize getChunkSize(byte[][] frames, int from, int to) {
        return GET_CHUNK_SIZE;
    }

    public Request.GetExperimental getExperimental(byte[][] frames, int from, int to) {
        return GET_EXPERIMENTAL;
    }

    public Request.Noop noop(byte[][] frames, int from, int to) {
        return NOOP;
    }

    public Request.Ping ping(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(decodePing(p));
    }

    public Request.RegisterKvCache registerKvCache(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(decodeRegister(p));
    }

    public Request.UnregisterKvCache unregisterKvCache(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.UnregisterKvCache(instanceId(p, 0)));
    }

    public Request.Lookup lookup(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.Lookup(key(p.require(0, "key")), p.optionalInt(1, "tp_size", 1)));
    }

    public Request.QueryPrefetchStatus queryPrefetchStatus(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.QueryPrefetchStatus(requestId(p)));
    }

    public Request.QueryPrefetchLookupHits queryPrefetchLookupHits(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.QueryPrefetchLookupHits(requestId(p)));
    }

    public Request.WaitPrefetchStatus waitPrefetchStatus(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.WaitPrefetchStatus(requestId(p), p.has(1) ? p.reader(1).readDouble("timeout") : 0.0));
    }

    public Request.FreeLookupLocks freeLookupLocks(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.FreeLookupLocks(key(p.require(0, "key")), p.optionalInt(1, "tp_size", 1)));
    }

    public Request.EndSession endSession(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        String requestId = requestId(p);
        Request.SessionEndInfo endInfo = p.has(1) ? sessionEndInfo(p.reader(1)) : null;
        return p.end(new Request.EndSession(requestId, endInfo));
    }

    public Request.PollKvEvents pollKvEvents(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.PollKvEvents(p.require(0, "model_name").readString(WireField.MODEL_NAME), p.require(1, "cursor").readLong("cursor"),
                p.require(2, "max_events").readLong("max_events")));
    }

    public Request.SubscribeKvEvents subscribeKvEvents(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.SubscribeKvEvents(instanceId(p, 0), p.require(1, "model_name").readString(WireField.MODEL_NAME),
                p.require(2, "cursor").readLong("cursor"), p.require(3, "max_events").readLong("max_events")));
    }

    public Request.Store store(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.Store(key(p.require(0, "key")), instanceId(p, 1), blockIds(p.require(2, "block_ids")), eventHandle(p, 3)));
    }

    public Request.Retrieve retrieve(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.Retrieve(key(p.require(0, "key")), instanceId(p, 1), blockIds(p.require(2, "block_ids")),
                eventHandle(p, 3), p.optionalInt(4, "skip_first_n_tokens", 0)));
    }

    /** RETRIEVE_LAYERWISE: RETRIEVE's five payloads ({@code protocols/layerwise.py@3ed3c8ba}). */
    public Request.RetrieveLayerwise retrieveLayerwise(byte[][] frames, int from, int to) throws ProtocolException {
        return new Request.RetrieveLayerwise(retrieve(frames, from, to));
    }

    public Request.RegisterLayerwiseEventPool registerLayerwiseEventPool(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.RegisterLayerwiseEventPool(instanceId(p, 0)));
    }

    public Request.ReportBlockAllocation reportBlockAllocation(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(decodeBlockAllocation(p));
    }

    public Request.Clear clear(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.Clear(optionalBool(p, 0, "force")));
    }

    public Request.RegisterEngineDrivenContext registerEngineDrivenContext(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.RegisterEngineDrivenContext(engineDriven(p.require(0, "payload"))));
    }

    public Request.UnregisterEngineDrivenContext unregisterEngineDrivenContext(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.UnregisterEngineDrivenContext(instanceId(p, 0)));
    }

    public Request.PrepareStore prepareStore(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.PrepareStore(key(p.require(0, "key")), instanceId(p, 1)));
    }

    public Request.CommitStore commitStore(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.CommitStore(key(p.require(0, "key")), instanceId(p, 1), p.has(2) ? binaryOrNil(p.reader(2), "data") : new byte[0]));
    }

    public Request.PrepareRetrieve prepareRetrieve(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.PrepareRetrieve(key(p.require(0, "key")), instanceId(p, 1)));
    }

    public Request.CommitRetrieve commitRetrieve(byte[][] frames, int from, int to) throws ProtocolException {
        Payloads p = payloads.open(frames, from, to);
        return p.end(new Request.CommitRetrieve(key(p.require(0, "key")), instanceId(p, 1)));
    }

    // --- shared pieces ------------------------------------------------------------------------

    private static long instanceId(Payloads p, int index) throws ProtocolException {
        return p.require(index, "instance_id").readLong("instance_id");
    }

    private static Request.Ping decodePing(Payloads p) throws ProtocolException {
        if (!p.has(0)) {
            return UNTRACKED_PING;
        }
        MsgpackReader r = p.reader(0);
        if (r.tryReadNil("instance_id")) {
            return UNTRACKED_PING;
        }
        long id = r.readLong("instance_id");
        return new Request.Ping(false, id);
    }

    private static Request.RegisterKvCache decodeRegister(Payloads p) throws ProtocolException {
        long instanceId = p.require(0, "instance_id").readLong("instance_id");
        MsgpackReader r = p.require(1, "kv_cache");
        int count = r.readArrayHeader(WireField.KV_CACHE);
        List<TensorWrapper> wrappers = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            ExtensionTypeHeader header = r.readExtensionHeader(WireField.WRAPPER_PICKLE);
            if (header.getType() != WRAPPER_EXT_TYPE) {
                throw new ProtocolException(Reason.BAD_EXTENSION, "kv_cache[" + i + "]: msgpack extension type " + header.getType()
                        + " is not the tensor-wrapper type 1");
            }
            wrappers.add(WrapperDecoder.decode(r.readPayload("kv_cache[" + i + "]", header.getLength())));
        }
        String modelName = p.has(2) ? p.reader(2).readString(WireField.MODEL_NAME) : "";
        int worldSize = p.optionalInt(3, "world_size", 1);
        String engineType = p.has(4) ? p.reader(4).readString(WireField.ENGINE_TYPE) : "vllm";
        LayoutHints hints = p.has(5) ? layoutHints(p.reader(5)) : LayoutHints.NONE;
        List<EngineGroupInfo> groups = p.has(6) ? engineGroups(p.reader(6)) : List.of();
        return new Request.RegisterKvCache(instanceId, List.copyOf(wrappers), modelName, worldSize, engineType, hints, groups);
    }

    private static Request.ReportBlockAllocation decodeBlockAllocation(Payloads p) throws ProtocolException {
        long instanceId = p.has(0) ? p.reader(0).readLong("instance_id") : 0;
        String modelName = p.has(1) ? p.reader(1).readString(WireField.MODEL_NAME) : "";
        List<BlockAllocationRecord> records = new ArrayList<>();
        if (p.has(2)) {
            MsgpackReader r = p.reader(2);
            int count = r.readArrayHeader(WireField.RECORDS);
            for (int i = 0; i < count; i++) {
                int fields = r.readMapHeader(WireField.RECORD);
                String reqId = "";
                int[] blocks = new int[0];
                int[] tokens = new int[0];
                for (int f = 0; f < fields; f++) {
                    switch (r.readString(WireField.FIELD_NAME)) {
                        case "req_id" -> reqId = r.readString(WireField.REQUEST_ID);
                        case "new_block_ids" -> blocks = r.readIntArray(WireField.NEW_BLOCK_IDS);
                        case "new_token_ids" -> tokens = r.readIntArray(WireField.NEW_TOKEN_IDS);
                        default -> r.skipValue("records field");
                    }
                }
                records.add(new BlockAllocationRecord(reqId, blocks, tokens));
            }
        }
        return new Request.ReportBlockAllocation(instanceId, modelName, records);
    }

    /** LMCache's {@code SessionEndInfo}: a map by field name, or an array {@code [finish_reason, stop_token_id]}; nil = none. */
    private static Request.SessionEndInfo sessionEndInfo(MsgpackReader r) throws ProtocolException {
        if (r.tryReadNil("end_info")) {
            return null;
        }
        String finishReason = null;
        long stopToken = Request.SessionEndInfo.NO_STOP_TOKEN;
        if (r.nextType("end_info") == ValueType.ARRAY) {
            int count = r.readArrayHeader(WireField.END_INFO);
            for (int i = 0; i < count; i++) {
                switch (i) {
                    case 0 -> finishReason = r.tryReadNil("end_info.finish_reason") ? null : r.readString(WireField.FINISH_REASON);
                    case 1 -> stopToken = r.tryReadNil("end_info.stop_token_id") ? stopToken : r.readLong("end_info.stop_token_id");
                    default -> r.skipValue("end_info");
                }
            }
        } else {
            int fields = r.readMapHeader(WireField.END_INFO);
            for (int i = 0; i < fields; i++) {
                switch (r.readString(WireField.FIELD_NAME)) {
                    case "finish_reason" -> finishReason = r.tryReadNil("end_info.finish_reason") ? null : r.readString(WireField.FINISH_REASON);
                    case "stop_token_id" -> stopToken = r.tryReadNil("end_info.stop_token_id") ? stopToken : r.readLong("end_info.stop_token_id");
                    default -> r.skipValue("end_info field");
                }
            }
        }
        r.expectEnd("end_info");
        return new Request.SessionEndInfo(finishReason, stopToken);
    }

    private static boolean optionalBool(Payloads p, int index, String what) throws ProtocolException {
        if (!p.has(index)) {
            return false;
        }
        MsgpackReader r = p.reader(index);
        return !r.tryReadNil(what) && r.readBool(what);
    }

    private static String requestId(Payloads p) throws ProtocolException {
        return p.require(0, "request_id").readString(WireField.REQUEST_ID);
    }

    private static byte[] binaryOrNil(MsgpackReader r, String what) throws ProtocolException {
        return r.tryReadNil(what) ? new byte[0] : r.readBinary(WireField.COMMIT_DATA);
    }

    private static byte[] eventHandle(Payloads p, int index) throws ProtocolException {
        if (!p.has(index)) {
            return NO_EVENT;
        }
        MsgpackReader r = p.reader(index);
        if (r.tryReadNil("event_ipc_handle")) {
            return NO_EVENT;
        }
        return r.readBinary(WireField.EVENT_IPC_HANDLE);
    }

    /** {@code list[list[int]]}, one list per KV group; an older flat {@code list[int]} is one group. */
    private static int[][] blockIds(MsgpackReader r) throws ProtocolException {
        int groups = r.readArrayHeader(WireField.BLOCK_IDS); // a flat list's ids, or the groups: the groups' limit is checked below
        if (groups == 0) {
            return new int[0][];
        }
        if (r.nextType("block_ids") == ValueType.INTEGER) {
            int[] flat = new int[groups];
            for (int i = 0; i < groups; i++) {
                flat[i] = r.readInt("block_ids");
            }
            return new int[][] {flat};
        }
        r.checkLimit(WireField.KV_GROUPS, groups);
        int[][] out = new int[groups][];
        for (int g = 0; g < groups; g++) {
            out[g] = r.readIntArray(WireField.BLOCK_IDS);
        }
        return out;
    }

    /** An {@code IPCCacheServerKey} map: decoded by field name, unknown fields skipped, missing ones defaulted. */
    private static CacheKey key(MsgpackReader r) throws ProtocolException {
        int fields = r.readMapHeader(WireField.KEY);
        String modelName = "";
        int worldSize = 1;
        int workerId = CacheKey.NO_WORKER;
        int[] tokenIds = new int[0];
        int start = 0;
        int end = -1;
        String requestId = "";
        String cacheSalt = "";
        int numKvReaders = 0;
        RequestConfigs configs = RequestConfigs.NONE;
        for (int i = 0; i < fields; i++) {
            String field = r.readString(WireField.FIELD_NAME);
            switch (field) {
                case "model_name" -> modelName = r.readString(WireField.MODEL_NAME);
                case "world_size" -> worldSize = r.readInt("key.world_size");
                case "worker_id" -> workerId = r.tryReadNil("key.worker_id") ? CacheKey.NO_WORKER : nonNegative(r.readInt("key.worker_id"), "key.worker_id");
                case "token_ids" -> tokenIds = r.readIntArray(WireField.TOKEN_IDS, TOKEN_IDS);
                case "start" -> start = r.readInt("key.start");
                case "end" -> end = r.readInt("key.end");
                case "request_id" -> requestId = r.tryReadNil("key.request_id") ? "" : r.readString(WireField.REQUEST_ID);
                case "cache_salt" -> cacheSalt = r.tryReadNil("key.cache_salt") ? "" : r.readString(WireField.CACHE_SALT);
                case "num_kv_readers" -> numKvReaders = r.tryReadNil("key.num_kv_readers") ? 0 : r.readInt("key.num_kv_readers");
                case "request_configs" -> configs = requestConfigs(r);
                default -> r.skipValue("key." + field);
            }
        }
        r.expectEnd("key");
        if (end < 0) {
            end = tokenIds.length;
        }
        checkSalt(cacheSalt);
        return new CacheKey(modelName, worldSize, workerId, tokenIds, start, end, requestId, cacheSalt, numKvReaders, configs);
    }

    /**
     * LMCache's {@code ObjectKey} invariant on {@code cache_salt} ({@code lmcache/v1/distributed/api.py}): no {@code @ / \}
     * or NUL (the L2 names' separator and path characters), at most 128 characters. It raises on any other, failing the
     * request; so does this.
     */
    private static void checkSalt(String salt) throws ProtocolException {
        if (salt.isEmpty()) {
            return;
        }
        if (salt.codePointCount(0, salt.length()) > RequestTags.MAX_CHARS) {
            throw new ProtocolException(Reason.BAD_SALT, "key.cache_salt is longer than " + RequestTags.MAX_CHARS + " characters");
        }
        for (int i = 0; i < salt.length(); i++) {
            char c = salt.charAt(i);
            if (c == '@' || c == '/' || c == '\\' || c == 0) {
                throw new ProtocolException(Reason.BAD_SALT, "key.cache_salt contains '" + (c == 0 ? "NUL" : String.valueOf(c)) + "'");
            }
        }
    }

    /**
     * The {@code lmcache.tag.*} entries of {@code request_configs} (a map or nil); other entries are skipped, whatever
     * their type. A tag whose value is not a string, or whose name or value breaks LMCache's rules, fails the request.
     */
    private static String clip(String text) {
        return text.length() <= 40 ? text : text.substring(0, 40) + "...";
    }

    /**
     * {@code request_configs}: nil or a map by name. {@code lmcache.skip_load} counts when truthy (LMCache tests it with
     * {@code .get(key, False)}: true or a non-zero int); the engine's covered tokens when a non-negative int; the
     * {@code lmcache.tag.*} entries are the request's tags. Other entries and other value types are skipped.
     */
    private static RequestConfigs requestConfigs(MsgpackReader r) throws ProtocolException {
        if (r.tryReadNil("key.request_configs")) {
            return RequestConfigs.NONE;
        }
        int entries = r.readMapHeader(WireField.REQUEST_CONFIGS);
        boolean skipLoad = false;
        int computed = RequestConfigs.UNKNOWN;
        List<RequestTags.Tag> tags = new ArrayList<>();
        for (int i = 0; i < entries; i++) {
            String name = r.nextType("request_configs key") == ValueType.STRING ? r.readString(WireField.CONFIG_NAME) : null;
            if (name == null) {
                r.skipValue("request_configs key");
                r.skipValue("request_configs value");
            } else if (name.startsWith(RequestTags.PREFIX)) {
                addTag(r, name, tags);
            } else if (name.equals(RequestConfigs.SKIP_LOAD) && r.nextType(name) == ValueType.BOOLEAN) {
                skipLoad = r.readBool(name);
            } else if (name.equals(RequestConfigs.SKIP_LOAD) && r.nextType(name) == ValueType.INTEGER) {
                skipLoad = r.readLong(name) != 0;
            } else if (name.equals(RequestConfigs.ENGINE_COMPUTED_TOKENS) && r.nextType(name) == ValueType.INTEGER) {
                long tokens = r.readLong(name);
                computed = tokens >= 0 && tokens <= Integer.MAX_VALUE ? (int) tokens : RequestConfigs.UNKNOWN;
            } else {
                r.skipValue("request_configs." + name);
            }
        }
        RequestTags sorted = RequestTags.of(tags);
        return skipLoad || computed != RequestConfigs.UNKNOWN || !sorted.isEmpty() ? new RequestConfigs(skipLoad, computed, sorted)
                : RequestConfigs.NONE;
    }

    /**
     * One {@code lmcache.tag.*} entry: a tag whose value is not a string, or whose name or value breaks LMCache's rules, fails
     * the request.
     */
    private static void addTag(MsgpackReader r, String name, List<RequestTags.Tag> tags) throws ProtocolException {
        String tag = name.substring(RequestTags.PREFIX.length());
        if (r.nextType("key.request_configs." + name) != ValueType.STRING) {
            throw new ProtocolException(Reason.BAD_TAG, "tag '" + clip(tag) + "': the value must be a string");
        }
        String value = r.readString(WireField.TAG_VALUE);
        String problem = RequestTags.problem("tag name", tag);
        problem = problem != null ? problem : RequestTags.problem("tag value", value);
        if (problem != null) {
            throw new ProtocolException(Reason.BAD_TAG, "tag '" + clip(tag) + "': " + problem);
        }
        if (tags.size() == RequestTags.MAX_TAGS) {
            throw new ProtocolException(Reason.BAD_TAG, "more than " + RequestTags.MAX_TAGS + " tags");
        }
        tags.add(new RequestTags.Tag(tag, value));
    }

    private static int nonNegative(int value, String what) throws ProtocolException {
        if (value < 0) {
            throw new ProtocolException(Reason.BAD_VALUE, what + " must not be negative, got " + value);
        }
        return value;
    }

    private static LayoutHints layoutHints(MsgpackReader r) throws ProtocolException {
        if (r.tryReadNil("layout_hints")) {
            return LayoutHints.NONE;
        }
        int fields = r.readMapHeader(WireField.LAYOUT_HINTS);
        String kvLayout = "";
        int heads = 0;
        int tokensPerBlock = 0;
        int headDim = 0;
        for (int i = 0; i < fields; i++) {
            String field = r.readString(WireField.FIELD_NAME);
            if (r.tryReadNil("layout_hints." + field)) {
                continue;
            }
            switch (field) {
                case "kv_layout" -> kvLayout = r.readString(WireField.KV_LAYOUT);
                case "num_kv_heads" -> heads = r.readInt("layout_hints.num_kv_heads");
                case "tokens_per_block" -> tokensPerBlock = r.readInt("layout_hints.tokens_per_block");
                case "head_dim" -> headDim = r.readInt("layout_hints.head_dim");
                default -> r.skipValue("layout_hints." + field);
            }
        }
        return new LayoutHints(kvLayout, heads, tokensPerBlock, headDim);
    }

    private static List<EngineGroupInfo> engineGroups(MsgpackReader r) throws ProtocolException {
        if (r.tryReadNil("engine_group_infos")) {
            return List.of();
        }
        int count = r.readArrayHeader(WireField.KV_GROUPS);
        List<EngineGroupInfo> groups = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int fields = r.readMapHeader(WireField.GROUP_INFO);
            GroupFields g = new GroupFields(i);
            for (int f = 0; f < fields; f++) {
                String field = r.readString(WireField.FIELD_NAME);
                if (r.tryReadNil("engine_group_infos." + field)) {
                    continue; // nil: the field's default (LMCache's int | None fields)
                }
                if (!g.core(field, r) && !g.tail(field, r)) {
                    r.skipValue("engine_group_infos." + field);
                }
            }
            groups.add(g.info());
        }
        return List.copyOf(groups);
    }

    /** One {@code EngineGroupInfo} map as it is read: LMCache's defaults until a field says otherwise. */
    private static final class GroupFields {
        private int id;
        private int[] layers = new int[0];
        private int tokensPerBlock;
        private int window = EngineGroupInfo.FULL_ATTENTION;
        private int tag;
        private boolean recurrent;
        private final EngineGroupInfo.Tail d = EngineGroupInfo.Tail.DEFAULTS;
        private int tokensPerState = d.tokensPerState();
        private String cacheRole = d.cacheRole();
        private long stateContentBytes = d.stateContentBytes();
        private long blockStrideAlignment = d.blockStrideAlignment();
        private boolean indexLeader = d.indexGroupLeader();
        private boolean prefixCacheable = d.prefixCacheable();
        private long pageSizePadded = d.pageSizePadded();
        private long numHeadSlots = d.numHeadSlots();
        private int physicalPerEngine = d.physicalBlocksPerEngineBlock();
        private int nullBlockId = d.nullBlockId();

        GroupFields(int position) {
            this.id = position;
        }

        /** The six core fields; false for any other name. */
        boolean core(String field, MsgpackReader r) throws ProtocolException {
            switch (field) {
                case "engine_group_id" -> id = r.readInt("engine_group_id");
                case "layer_indices" -> layers = r.readIntArray(WireField.LAYER_INDICES);
                case "tokens_per_block" -> tokensPerBlock = r.readInt("tokens_per_block");
                case "sw_size_tokens" -> window = r.readInt("sw_size_tokens");
                case "extra_object_group_tag" -> tag = r.readInt("extra_object_group_tag");
                case "recurrent_state" -> recurrent = r.readBool("recurrent_state");
                default -> {
                    return false;
                }
            }
            return true;
        }

        /** The appended fields (group_view.py's V4.1 block, and two branch variants); false for any other name. */
        boolean tail(String field, MsgpackReader r) throws ProtocolException {
            switch (field) {
                case "tokens_per_state" -> tokensPerState = r.readInt("tokens_per_state");
                case "cache_role" -> cacheRole = r.readString(WireField.CACHE_ROLE);
                case "state_content_bytes" -> stateContentBytes = r.readLong("state_content_bytes");
                case "block_stride_alignment" -> blockStrideAlignment = r.readLong("block_stride_alignment");
                case "is_index_group_leader" -> indexLeader = r.readBool("is_index_group_leader");
                case "prefix_cacheable" -> prefixCacheable = r.readBool("prefix_cacheable");
                case "page_size_padded" -> pageSizePadded = r.readLong("page_size_padded");
                case "num_head_slots" -> numHeadSlots = r.readLong("num_head_slots");
                case "physical_blocks_per_engine_block" -> physicalPerEngine = r.readInt("physical_blocks_per_engine_block");
                case "null_block_id" -> nullBlockId = r.readInt("null_block_id");
                default -> {
                    return false;
                }
            }
            return true;
        }

        EngineGroupInfo info() {
            return new EngineGroupInfo(id, layers, tokensPerBlock, window, tag, recurrent, new EngineGroupInfo.Tail(tokensPerState,
                    cacheRole, stateContentBytes, blockStrideAlignment, indexLeader, prefixCacheable, pageSizePadded, numHeadSlots,
                    physicalPerEngine, nullBlockId));
        }
    }

    private static EngineDrivenRegistration engineDriven(MsgpackReader r) throws ProtocolException {
        int fields = r.readMapHeader(WireField.ENGINE_PAYLOAD);
        long instanceId = 0;
        boolean hasInstance = false;
        String modelName = "";
        int worldSize = 1;
        int blockSize = 0;
        int numLayers = 0;
        int hidden = 0;
        String dtype = "";
        boolean useMla = false;
        int slots = 0;
        int kvGroups = 0;
        for (int i = 0; i < fields; i++) {
            String field = r.readString(WireField.FIELD_NAME);
            switch (field) {
                case "instance_id" -> {
                    instanceId = r.readLong("payload.instance_id");
                    hasInstance = true;
                }
                case "model_name" -> modelName = r.readString(WireField.MODEL_NAME);
                case "world_size" -> worldSize = r.readInt("payload.world_size");
                case "block_size" -> blockSize = r.readInt("payload.block_size");
                case "num_layers" -> numLayers = r.readInt("payload.num_layers");
                case "hidden_dim_size" -> hidden = r.readInt("payload.hidden_dim_size");
                case "dtype_str" -> dtype = r.readString(WireField.DTYPE);
                case "use_mla" -> useMla = r.readBool("payload.use_mla");
                case "num_physical_slots" -> slots = r.tryReadNil("payload.num_physical_slots") ? 0 : r.readInt("payload.num_physical_slots");
                case "engine_group_infos", "group_layouts" -> kvGroups = Math.max(kvGroups, countEntries(r, WireField.KV_GROUPS));
                default -> r.skipValue("payload." + field);
            }
        }
        r.expectEnd("payload");
        if (!hasInstance) {
            throw new ProtocolException(Reason.MISSING_FRAMES, "payload: instance_id is missing");
        }
        return new EngineDrivenRegistration(instanceId, modelName, worldSize, blockSize, numLayers, hidden, dtype, useMla, slots, kvGroups);
    }

    /** Entries of an array or map value (a KV-group list some payload versions carry), skipped; 0 for nil or a scalar. */
    private static int countEntries(MsgpackReader r, WireField field) throws ProtocolException {
        String what = field.wireName();
        ValueType type = r.nextType(what);
        if (type == ValueType.ARRAY) {
            int count = r.readArrayHeader(field);
            for (int i = 0; i < count; i++) {
                r.skipValue(what);
            }
            return count;
        }
        if (type == ValueType.MAP) {
            int count = r.readMapHeader(field);
            for (int i = 0; i < 2 * count; i++) {
                r.skipValue(what);
            }
            return count;
        }
        r.skipValue(what);
        return 0;
    }
}
