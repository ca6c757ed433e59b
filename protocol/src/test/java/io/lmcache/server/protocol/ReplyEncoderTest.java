package io.lmcache.server.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.protocol.testing.Golden;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.Value;
import org.msgpack.value.ValueFactory;

/** Reply bytes: the worked examples of protocol doc §3.3 and every engine-driven reply the real client accepted. */
class ReplyEncoderTest {
    private final ReplyEncoder encoder = new ReplyEncoder();

    @Test
    void workedExamples() {
        assertEquals("cd0100", hex(encoder.encode(new Reply.Int(256))));
        assertEquals("c3", hex(encoder.encode(Reply.TRUE)));
        assertEquals("c2", hex(encoder.encode(Reply.FALSE)));
        assertEquals("a24f4b", hex(encoder.encode(new Reply.Str("OK"))));
        assertEquals("90", hex(encoder.encode(new Reply.StrList(List.of()))));
        assertEquals("02", hex(encoder.encode(new Reply.Int(2))));
        assertNull(encoder.encode(Reply.NONE));
        byte[] transfer = encoder.encode(new Reply.Transfer(new byte[64], true));
        assertEquals("92c440" + "00".repeat(64) + "c3", hex(transfer));
    }

    /** Rebuild each golden engine-driven reply from its decoded values and compare bytes. */
    @Test
    void engineDrivenRepliesMatchTheGoldenBytes() throws IOException {
        int compared = 0;
        for (String file : Golden.files()) {
            if (!file.startsWith("engine_driven")) {
                continue;
            }
            for (Golden.Message m : Golden.load(file)) {
                if (m.clientToServer() || m.payloadCount() == 0) {
                    continue;
                }
                Reply rebuilt = switch (m.op()) {
                    case "register_kv_cache_engine_driven_context" -> {
                        Map<Value, Value> map = generic(m.payload(0)).asMapValue().map();
                        yield new Reply.EnginePool(map.get(s("shm_name")).asStringValue().asString(),
                                map.get(s("pool_size")).asIntegerValue().asLong());
                    }
                    case "prepare_store" -> {
                        Map<Value, Value> context = generic(m.payload(0)).asMapValue().map().get(s("context")).asMapValue().map();
                        List<Value> indices = context.get(s("chunk_indices")).asArrayValue().list();
                        int[] chunkIndices = indices.stream().mapToInt(v -> v.asIntegerValue().asInt()).toArray();
                        yield new Reply.PrepareStore(slots(context.get(s("slots"))), chunkIndices);
                    }
                    case "prepare_retrieve" -> {
                        Map<Value, Value> map = generic(m.payload(0)).asMapValue().map();
                        boolean success = map.get(s("success")).asBooleanValue().getBoolean();
                        Value slots = map.get(s("context")).asMapValue().map().get(s("slots"));
                        yield new Reply.PrepareRetrieve(success, slots == null ? List.of() : slots(slots));
                    }
                    case "commit_store", "commit_retrieve" -> generic(m.payload(0)).asBooleanValue().getBoolean() ? Reply.TRUE : Reply.FALSE;
                    case "get_chunk_size" -> new Reply.Int(generic(m.payload(0)).asIntegerValue().asLong());
                    default -> null;
                };
                if (rebuilt != null) {
                    assertArrayEquals(m.payload(0), encoder.encode(rebuilt), m.toString());
                    compared++;
                }
            }
        }
        assertEquals(true, compared > 20, "compared " + compared + " golden engine-driven replies");
    }

    private static List<Reply.Slot> slots(Value value) {
        List<Reply.Slot> slots = new ArrayList<>();
        for (Value slot : value.asArrayValue()) {
            Map<Value, Value> map = slot.asMapValue().map();
            int[] shape = map.get(s("shape")).asArrayValue().list().stream().mapToInt(v -> v.asIntegerValue().asInt()).toArray();
            slots.add(new Reply.Slot(map.get(s("offset")).asIntegerValue().asLong(), map.get(s("length")).asIntegerValue().asLong(),
                    shape, map.get(s("dtype")).asStringValue().asString()));
        }
        return slots;
    }

    private static Value s(String text) {
        return ValueFactory.newString(text);
    }

    private static Value generic(byte[] frame) throws IOException {
        try (MessageUnpacker unpacker = MessagePack.newDefaultUnpacker(frame)) {
            return unpacker.unpackValue();
        }
    }

    private static String hex(byte[] bytes) {
        return HexFormat.of().formatHex(bytes);
    }

    /** A record's token ids, written as one payload, are byte for byte what MessagePacker.packInt writes, edges and all. */
    @Test
    void kvEventTokenIdsEncodeAsPackIntDoes() throws IOException {
        int[] edges = {Integer.MIN_VALUE, -(1 << 15) - 1, -(1 << 15), -129, -128, -33, -32, -1, 0, 1, 127, 128, 255, 256, 65_535,
            65_536, 151_935, Integer.MAX_VALUE};
        Random random = new Random(28);
        int[] tokens = new int[edges.length + 600];
        System.arraycopy(edges, 0, tokens, 0, edges.length);
        for (int i = edges.length; i < tokens.length; i++) {
            tokens[i] = random.nextInt() >> random.nextInt(32); // every width, both signs
        }
        Reply.KvEventRecord record = new Reply.KvEventRecord(3, KvEventKind.STORED, "CPU", "m", List.of(new byte[32]), null, tokens, 256);
        byte[] encoded = encoder.encode(new Reply.KvEvents(true, 7, 4, false, List.of(record)));
        MessageBufferPacker expected = MessagePack.newDefaultBufferPacker();
        expected.packArrayHeader(tokens.length);
        for (int token : tokens) {
            expected.packInt(token);
        }
        String tokensHex = hex(expected.toByteArray());
        assertTrue(hex(encoded).contains("a9746f6b656e5f696473" + tokensHex),
                "token_ids as packInt encodes them");
    }

    /** A batch put together from records encoded one by one is the batch encoded whole. */
    @Test
    void aBatchOfRecordsEncodedAloneIsTheBatchEncodedWhole() {
        List<Reply.KvEventRecord> records = List.of(
                new Reply.KvEventRecord(5, KvEventKind.STORED, "CPU", "m", List.of(new byte[32]), null, new int[] {1, 70_000, -3}, 256),
                new Reply.KvEventRecord(6, KvEventKind.REMOVED, "STORAGE", "m", List.of(new byte[32], new byte[32]), new byte[32], new int[0], 256));
        Reply.KvEvents batch = new Reply.KvEvents(true, 9, 7, true, records);
        byte[] whole = encoder.encode(batch);
        List<byte[]> alone = new ArrayList<>();
        for (Reply.KvEventRecord record : records) {
            alone.add(encoder.encodeKvEventRecord(record));
        }
        assertArrayEquals(whole, encoder.encodeKvEvents(true, 9, 7, true, alone));
    }
}
