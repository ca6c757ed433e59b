package io.lmcache.server.protocol.testing;

import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.RequestDecoder;
import io.lmcache.server.protocol.WireField;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessagePacker;

/**
 * Generated requests for the wire-limit tests: the payload frames of a well-formed request of any op the server decodes, in
 * which every bounded field ({@link WireField#of}) is present, with a small size, or one field at a chosen size (its limit,
 * its limit + 1). A map field's size is its entry count (unknown entries are added, which the decoder skips); a
 * {@link WireField#FIELD_NAME} of size n adds to every map one unknown entry whose name has n bytes. Strings are made of
 * 4-byte characters (plus ASCII for the rest), so a salt or tag value at its byte limit keeps LMCache's 128-character rule.
 */
public final class WireRequests {
    /** A CpuShmTensorWrapper pickled by Python (protocol 5), without its FRAME opcode and its closing SETITEMS, BUILD, STOP. */
    private static final byte[] WRAPPER_BODY = HexFormat.of().parseHex(
            "80058c1b6c6d63616368652e76312e706c6174666f726d2e6370752e73686d948c1343707553686d54656e736f72577261707065729493"
                    + "942981947d94288c0873686d5f6e616d65948c0f2f6c6d63616368655f6b765f315f30948c066e6279746573948a060000000000018c0668616e646c65944e8c"
                    + "056474797065948c07666c6f61743136948c05736861706594284b024b044b104b024b4074948c0673747269646594284d00204d00084b804b404b0174948c0e"
                    + "73746f726167655f6f6666736574944b008c0b6465766963655f75756964948c03637075");
    /** SHORT_BINUNICODE "pad", then BINUNICODE with a 4-byte length: an extra state entry the decoder ignores. */
    private static final byte[] PAD_KEY = HexFormat.of().parseHex("8c0370616458");
    private static final byte[] PICKLE_END = HexFormat.of().parseHex("75622e");
    /** The smallest wrapper pickle this class makes (an empty pad). */
    public static final int MIN_WRAPPER_BYTES = WRAPPER_BODY.length + PAD_KEY.length + 4 + PICKLE_END.length;

    private final WireField field;
    private final int size;

    private WireRequests(WireField field, int size) {
        this.field = field;
        this.size = size;
    }

    /** A request of {@code op} with every field small; null for an op the server does not decode. */
    public static byte[][] of(Op op) {
        return new WireRequests(null, 0).frames(op);
    }

    /** A request of {@code op} whose {@code field} has {@code size} bytes, elements or entries; the rest small. */
    public static byte[][] of(Op op, WireField field, int size) {
        return new WireRequests(field, size).frames(op);
    }

    /** The size of {@code f} in this request. */
    private int size(WireField f) {
        if (f == field) {
            return size;
        }
        return switch (f) {
            case EVENT_IPC_HANDLE -> RequestDecoder.EVENT_HANDLE_BYTES;
            case WRAPPER_PICKLE -> MIN_WRAPPER_BYTES;
            case COMMIT_DATA -> 0;
            case TOKEN_IDS -> 8;
            case BLOCK_IDS, NEW_BLOCK_IDS, NEW_TOKEN_IDS -> 2;
            case KV_GROUPS, KV_CACHE, LAYER_INDICES, RECORDS -> 1;
            // maps: just their own entries; FIELD_NAME: no extra entry
            case KEY, REQUEST_CONFIGS, LAYOUT_HINTS, GROUP_INFO, ENGINE_PAYLOAD, END_INFO, RECORD, FIELD_NAME -> 0;
            default -> 8; // strings
        };
    }

    private byte[][] frames(Op op) {
        return switch (op) {
            case LOOKUP, FREE_LOOKUP_LOCKS -> frames(this::key, p -> p.packInt(1));
            case PREPARE_STORE, PREPARE_RETRIEVE, COMMIT_RETRIEVE -> frames(this::key, p -> p.packLong(7));
            case COMMIT_STORE -> frames(this::key, p -> p.packLong(7), p -> bin(p, size(WireField.COMMIT_DATA)));
            case STORE -> frames(this::key, p -> p.packLong(7), this::blockIds, p -> bin(p, size(WireField.EVENT_IPC_HANDLE)));
            case RETRIEVE, RETRIEVE_LAYERWISE -> frames(this::key, p -> p.packLong(7), this::blockIds, p -> bin(p, size(WireField.EVENT_IPC_HANDLE)),
                    p -> p.packInt(0));
            case QUERY_PREFETCH_STATUS, QUERY_PREFETCH_LOOKUP_HITS -> frames(p -> str(p, WireField.REQUEST_ID));
            case WAIT_PREFETCH_STATUS -> frames(p -> str(p, WireField.REQUEST_ID), p -> p.packDouble(0.5));
            case END_SESSION -> frames(p -> str(p, WireField.REQUEST_ID), this::endInfo);
            case POLL_KV_EVENTS -> frames(p -> str(p, WireField.MODEL_NAME), p -> p.packLong(0), p -> p.packLong(16));
            case SUBSCRIBE_KV_EVENTS -> frames(p -> p.packLong(7), p -> str(p, WireField.MODEL_NAME), p -> p.packLong(0),
                    p -> p.packLong(16));
            case REGISTER_KV_CACHE -> frames(p -> p.packLong(7), this::wrappers, p -> str(p, WireField.MODEL_NAME), p -> p.packInt(1),
                    p -> str(p, WireField.ENGINE_TYPE), this::layoutHints, this::groupInfos);
            case REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT -> frames(this::enginePayload);
            case REPORT_BLOCK_ALLOCATION -> frames(p -> p.packLong(7), p -> str(p, WireField.MODEL_NAME), this::records);
            case PING, UNREGISTER_KV_CACHE, UNREGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT, REGISTER_LAYERWISE_IPC_EVENT_POOL ->
                    frames(p -> p.packLong(7));
            case CLEAR -> frames(p -> p.packBoolean(true));
            case GET_CHUNK_SIZE, GET_EXPERIMENTAL, NOOP -> new byte[0][];
            case REGISTER_Q_CACHE, UNREGISTER_Q_CACHE, STORE_Q, CB_REGISTER_ROPE, CB_UNREGISTER_ROPE, CB_RETRIEVE_PRE_COMPUTED,
                    CB_UNIFIED_LOOKUP, CB_PROTOCOL_HANDSHAKE, P2P_LOOKUP_AND_LOCK, P2P_QUERY_LOOKUP_RESULTS, P2P_UNLOCK_OBJECTS -> null;
        };
    }

    // --- the fields --------------------------------------------------------------------------------------------------

    private void key(MessagePacker p) throws IOException {
        int tokens = size(WireField.TOKEN_IDS);
        List<Entry> entries = new ArrayList<>();
        entries.add(new Entry("model_name", q -> str(q, WireField.MODEL_NAME)));
        entries.add(new Entry("world_size", q -> q.packInt(1)));
        entries.add(new Entry("worker_id", q -> q.packInt(0)));
        entries.add(new Entry("token_ids", q -> ints(q, tokens)));
        entries.add(new Entry("start", q -> q.packInt(0)));
        entries.add(new Entry("end", q -> q.packInt(tokens)));
        entries.add(new Entry("request_id", q -> str(q, WireField.REQUEST_ID)));
        entries.add(new Entry("cache_salt", q -> str(q, WireField.CACHE_SALT)));
        entries.add(new Entry("num_kv_readers", q -> q.packInt(1)));
        entries.add(new Entry("request_configs", this::requestConfigs));
        map(p, WireField.KEY, entries);
    }

    /** A tag (its value sized), and one other entry whose name is sized (a non-tag name: skipped, so no tag rule applies). */
    private void requestConfigs(MessagePacker p) throws IOException {
        List<Entry> entries = new ArrayList<>();
        entries.add(new Entry("lmcache.tag.tenant", q -> str(q, WireField.TAG_VALUE)));
        entries.add(new Entry(ascii('c', size(WireField.CONFIG_NAME)), MessagePacker::packNil));
        map(p, WireField.REQUEST_CONFIGS, entries);
    }

    private void blockIds(MessagePacker p) throws IOException {
        int groups = size(WireField.KV_GROUPS);
        p.packArrayHeader(groups);
        for (int g = 0; g < groups; g++) {
            ints(p, size(WireField.BLOCK_IDS));
        }
    }

    private void endInfo(MessagePacker p) throws IOException {
        map(p, WireField.END_INFO, List.of(new Entry("finish_reason", q -> str(q, WireField.FINISH_REASON)),
                new Entry("stop_token_id", q -> q.packInt(2))));
    }

    private void wrappers(MessagePacker p) throws IOException {
        int count = size(WireField.KV_CACHE);
        byte[] pickle = wrapperPickle(size(WireField.WRAPPER_PICKLE));
        p.packArrayHeader(count);
        for (int i = 0; i < count; i++) {
            p.packExtensionTypeHeader(RequestDecoder.WRAPPER_EXT_TYPE, pickle.length).writePayload(pickle);
        }
    }

    private void layoutHints(MessagePacker p) throws IOException {
        map(p, WireField.LAYOUT_HINTS, List.of(new Entry("kv_layout", q -> str(q, WireField.KV_LAYOUT))));
    }

    private void groupInfos(MessagePacker p) throws IOException {
        int groups = size(WireField.KV_GROUPS);
        p.packArrayHeader(groups);
        for (int g = 0; g < groups; g++) {
            int id = g;
            map(p, WireField.GROUP_INFO, List.of(new Entry("engine_group_id", q -> q.packInt(id)),
                    new Entry("layer_indices", q -> ints(q, size(WireField.LAYER_INDICES))),
                    new Entry("cache_role", q -> str(q, WireField.CACHE_ROLE))));
        }
    }

    private void enginePayload(MessagePacker p) throws IOException {
        List<Entry> entries = new ArrayList<>();
        entries.add(new Entry("instance_id", q -> q.packLong(7)));
        entries.add(new Entry("model_name", q -> str(q, WireField.MODEL_NAME)));
        entries.add(new Entry("world_size", q -> q.packInt(1)));
        entries.add(new Entry("block_size", q -> q.packInt(16)));
        entries.add(new Entry("num_layers", q -> q.packInt(2)));
        entries.add(new Entry("hidden_dim_size", q -> q.packInt(64)));
        entries.add(new Entry("dtype_str", q -> str(q, WireField.DTYPE)));
        entries.add(new Entry("use_mla", q -> q.packBoolean(false)));
        entries.add(new Entry("num_physical_slots", MessagePacker::packNil));
        entries.add(new Entry("engine_group_infos", q -> {
            int groups = size(WireField.KV_GROUPS);
            q.packArrayHeader(groups);
            for (int g = 0; g < groups; g++) {
                q.packNil();
            }
        }));
        map(p, WireField.ENGINE_PAYLOAD, entries);
    }

    private void records(MessagePacker p) throws IOException {
        int count = size(WireField.RECORDS);
        p.packArrayHeader(count);
        for (int i = 0; i < count; i++) {
            map(p, WireField.RECORD, List.of(new Entry("req_id", q -> str(q, WireField.REQUEST_ID)),
                    new Entry("new_block_ids", q -> ints(q, size(WireField.NEW_BLOCK_IDS))),
                    new Entry("new_token_ids", q -> ints(q, size(WireField.NEW_TOKEN_IDS)))));
        }
    }

    // --- building blocks ---------------------------------------------------------------------------------------------

    @FunctionalInterface
    private interface Value {
        void pack(MessagePacker p) throws IOException;
    }

    private record Entry(String name, Value value) {}

    /**
     * A map of {@code entries}, plus one unknown entry whose name has {@link WireField#FIELD_NAME}'s size when that is
     * chosen, plus unknown nil entries up to {@code mapField}'s size.
     */
    private void map(MessagePacker p, WireField mapField, List<Entry> entries) throws IOException {
        List<Entry> all = new ArrayList<>(entries);
        if (field == WireField.FIELD_NAME) {
            all.add(new Entry(ascii('f', size), MessagePacker::packNil));
        }
        int count = Math.max(all.size(), size(mapField));
        p.packMapHeader(count);
        for (Entry e : all) {
            p.packString(e.name());
            e.value().pack(p);
        }
        for (int i = all.size(); i < count; i++) {
            p.packString("pad" + i);
            p.packNil();
        }
    }

    private void str(MessagePacker p, WireField f) throws IOException {
        byte[] utf8 = text(size(f));
        p.packRawStringHeader(utf8.length);
        p.writePayload(utf8);
    }

    /** {@code bytes} UTF-8 bytes: 4-byte characters, then ASCII for the remainder. */
    private static byte[] text(int bytes) {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < bytes / 4; i++) {
            out.appendCodePoint(0x1F600);
        }
        out.append("a".repeat(bytes % 4));
        return out.toString().getBytes(StandardCharsets.UTF_8);
    }

    private static String ascii(char c, int length) {
        return String.valueOf(c).repeat(length);
    }

    private static void bin(MessagePacker p, int length) throws IOException {
        p.packBinaryHeader(length);
        p.writePayload(new byte[length]);
    }

    private static void ints(MessagePacker p, int count) throws IOException {
        p.packArrayHeader(count);
        for (int i = 0; i < count; i++) {
            p.packInt(i & 0x7fff);
        }
    }

    /** A valid CpuShmTensorWrapper pickle of exactly {@code bytes} bytes (at least {@link #MIN_WRAPPER_BYTES}). */
    public static byte[] wrapperPickle(int bytes) {
        int pad = bytes - MIN_WRAPPER_BYTES;
        if (pad < 0) {
            throw new IllegalArgumentException("a wrapper pickle has at least " + MIN_WRAPPER_BYTES + " bytes");
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream(bytes);
        out.writeBytes(WRAPPER_BODY);
        out.writeBytes(PAD_KEY);
        out.write(pad & 0xff);
        out.write((pad >>> 8) & 0xff);
        out.write((pad >>> 16) & 0xff);
        out.write((pad >>> 24) & 0xff);
        out.writeBytes(ascii('p', pad).getBytes(StandardCharsets.US_ASCII));
        out.writeBytes(PICKLE_END);
        return out.toByteArray();
    }

    private static byte[][] frames(Value... values) {
        byte[][] frames = new byte[values.length][];
        for (int i = 0; i < values.length; i++) {
            try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
                values[i].pack(p);
                p.flush();
                frames[i] = p.toByteArray();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return frames;
    }
}
