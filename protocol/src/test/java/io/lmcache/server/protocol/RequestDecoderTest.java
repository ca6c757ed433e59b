package io.lmcache.server.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.protocol.testing.TestDecoders;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/** Arity leniency, op forms, and every way a frame can be malformed. */
class RequestDecoderTest {
    private final RequestDecoder decoder = new RequestDecoder();

    @Test
    void opsArriveAsFrozenIdsOrStringNames() throws Exception {
        assertEquals(Op.STORE, decoder.decodeOp(pack(p -> p.packInt(6))));
        assertEquals(Op.POLL_KV_EVENTS, decoder.decodeOp(pack(p -> p.packString("poll_kv_events"))));
        assertEquals(Op.POLL_KV_EVENTS, decoder.decodeOp(pack(p -> p.packInt(34))));
        assertEquals(Op.NOOP, decoder.decodeOp(pack(p -> p.packString("noop"))));
        assertNull(decoder.decodeOp(pack(p -> p.packInt(99))));
        assertNull(decoder.decodeOp(pack(p -> p.packInt(0))));
        assertNull(decoder.decodeOp(pack(p -> p.packString("no_such_op"))));
        assertThrows(ProtocolException.class, () -> decoder.decodeOp(pack(p -> p.packBoolean(true))));
        assertThrows(ProtocolException.class, () -> decoder.decodeOp(new byte[0]));
    }

    @Test
    void frozenTableMatchesTheProtocolDoc() {
        assertEquals(37, Op.values().length, "ids 1..34 and the name-only subscribe_kv_events and layer-wise ops");
        for (int id = 1; id <= 34; id++) {
            assertEquals(id, Op.fromId(id).id());
        }
        assertEquals(Op.SUBSCRIBE_KV_EVENTS, Op.fromName("subscribe_kv_events"));
        // LMCache's protocols/layerwise.py@3ed3c8ba REQUEST_NAMES, lowercased as E4 sends names
        assertEquals(Op.REGISTER_LAYERWISE_IPC_EVENT_POOL, Op.fromName("register_layerwise_ipc_event_pool"));
        assertEquals(Op.RETRIEVE_LAYERWISE, Op.fromName("retrieve_layerwise"));
        assertNull(Op.fromId(0), "a name-only op has no id");
        assertEquals(Op.GET_CHUNK_SIZE, Op.fromId(21));
        assertEquals(Op.PING, Op.fromId(22));
        assertEquals(Op.GET_EXPERIMENTAL, Op.fromId(32));
        assertEquals(Op.CB_REGISTER_ROPE, Op.fromName("cb_register_rope_v3"));
    }

    @Test
    void missingTrailingFramesTakeDefaults() throws Exception {
        byte[][] frames = {pack(p -> p.packString("req-1"))};
        Request.EndSession end = assertInstanceOf(Request.EndSession.class, decoder.endSession(frames, 0, 1));
        assertEquals("req-1", end.requestId());
        Request.Ping ping = assertInstanceOf(Request.Ping.class, decoder.ping(frames, 0, 0));
        assertTrue(ping.untracked());
        Request.Clear clear = assertInstanceOf(Request.Clear.class, decoder.clear(frames, 0, 0));
        assertEquals(false, clear.force());
        byte[][] store = {key(), pack(p -> p.packLong(7)), pack(p -> p.packArrayHeader(1).packArrayHeader(2).packInt(3).packInt(4))};
        Request.Store s = assertInstanceOf(Request.Store.class, decoder.store(store, 0, 3));
        assertEquals(64, s.eventHandle().length);
        assertArrayEquals(new int[] {3, 4}, s.blockIds()[0]);
    }

    @Test
    void flatBlockIdListIsOneGroup() throws Exception {
        byte[][] frames = {key(), pack(p -> p.packLong(7)), pack(p -> p.packArrayHeader(3).packInt(1).packInt(2).packInt(3)),
            pack(p -> p.packBinaryHeader(64).writePayload(new byte[64])), pack(p -> p.packInt(16))};
        Request.Retrieve r = assertInstanceOf(Request.Retrieve.class, decoder.retrieve(frames, 0, 5));
        assertEquals(1, r.blockIds().length);
        assertArrayEquals(new int[] {1, 2, 3}, r.blockIds()[0]);
        assertEquals(16, r.skipFirstNTokens());
    }

    @Test
    void engineGroupInfosDecodeTheSixCoreFieldsLeniently() throws Exception {
        // as msgspec writes the Struct: a map of every field in declaration order, here with a field of a newer client
        byte[] infos = pack(p -> {
            p.packArrayHeader(2);
            p.packMapHeader(7);
            p.packString("engine_group_id").packInt(0);
            p.packString("layer_indices").packArrayHeader(2).packInt(0).packInt(2);
            p.packString("tokens_per_block").packInt(32);
            p.packString("sw_size_tokens").packInt(1024);
            p.packString("extra_object_group_tag").packInt(0);
            p.packString("recurrent_state").packBoolean(false);
            p.packString("cache_role").packString("sparse");
            // an older client: the first two fields only
            p.packMapHeader(2);
            p.packString("engine_group_id").packInt(1);
            p.packString("layer_indices").packArrayHeader(1).packInt(1);
        });
        byte[][] frames = {pack(p -> p.packLong(9)), pack(p -> p.packArrayHeader(0)), pack(p -> p.packString("m")), pack(p -> p.packInt(1)),
            pack(p -> p.packString("vllm")), pack(p -> p.packMapHeader(0)), infos};
        Request.RegisterKvCache register = decoder.registerKvCache(frames, 0, frames.length);
        EngineGroupInfo sliding = register.engineGroups().get(0);
        assertArrayEquals(new int[] {0, 2}, sliding.layerIndices());
        assertEquals(32, sliding.tokensPerBlock());
        assertEquals(1024, sliding.swSizeTokens());
        assertEquals(0, sliding.extraObjectGroupTag());
        EngineGroupInfo old = register.engineGroups().get(1);
        assertEquals(1, old.engineGroupId());
        assertEquals(0, old.tokensPerBlock());
        assertEquals(EngineGroupInfo.FULL_ATTENTION, old.swSizeTokens());
        assertEquals(false, old.recurrentState());
    }

    @Test
    void engineGroupInfosDecodeTheDeepSeekTailWithNilAsDefault() throws Exception {
        // group_view.py's V4.1 fields, appended last; `int | None` fields arrive as nil when unset
        byte[] infos = pack(p -> {
            p.packArrayHeader(2);
            p.packMapHeader(12);
            p.packString("engine_group_id").packInt(3);
            p.packString("layer_indices").packArrayHeader(1).packInt(5);
            p.packString("tokens_per_block").packInt(256);
            p.packString("tokens_per_state").packInt(4);
            p.packString("cache_role").packString("indexer");
            p.packString("state_content_bytes").packInt(656);
            p.packString("block_stride_alignment").packInt(512);
            p.packString("is_index_group_leader").packBoolean(true);
            p.packString("prefix_cacheable").packBoolean(false);
            p.packString("page_size_padded").packNil();
            p.packString("num_head_slots").packInt(1);
            p.packString("null_block_id").packInt(0);
            p.packMapHeader(1);
            p.packString("engine_group_id").packInt(4);
        });
        byte[][] frames = {pack(p -> p.packLong(9)), pack(p -> p.packArrayHeader(0)), pack(p -> p.packString("m")), pack(p -> p.packInt(1)),
            pack(p -> p.packString("vllm")), pack(p -> p.packMapHeader(0)), infos};
        Request.RegisterKvCache register = decoder.registerKvCache(frames, 0, frames.length);
        EngineGroupInfo.Tail tail = register.engineGroups().get(0).tail();
        assertEquals(new EngineGroupInfo.Tail(4, "indexer", 656, 512, true, false, EngineGroupInfo.NOT_SET, 1, 1, 0), tail);
        assertEquals(false, register.engineGroups().get(0).prefixCacheable());
        assertEquals(EngineGroupInfo.Tail.DEFAULTS, register.engineGroups().get(1).tail());
    }

    @Test
    void engineDrivenPayloadCountsTheKvGroupsItLists() throws Exception {
        for (int groups = 0; groups <= 2; groups++) {
            int count = groups;
            byte[] payload = pack(p -> {
                p.packMapHeader(count == 0 ? 2 : 3);
                p.packString("instance_id").packLong(5);
                p.packString("model_name").packString("m");
                if (count > 0) {
                    p.packString("engine_group_infos").packArrayHeader(count);
                    for (int g = 0; g < count; g++) {
                        p.packMapHeader(1).packString("engine_group_id").packInt(g);
                    }
                }
            });
            Request.RegisterEngineDrivenContext r = decoder.registerEngineDrivenContext(new byte[][] {payload}, 0, 1);
            assertEquals(count, r.registration().kvGroups());
        }
    }

    @Test
    void keyToleratesUnknownFieldsAndDefaultsMissingOnes() throws Exception {
        byte[] key = pack(p -> {
            p.packMapHeader(4);
            p.packString("model_name").packString("m");
            p.packString("future_field").packArrayHeader(2).packInt(1).packString("x");
            p.packString("token_ids").packArrayHeader(3).packInt(1).packInt(2).packInt(3);
            p.packString("worker_id").packNil();
        });
        Request.Lookup lookup = assertInstanceOf(Request.Lookup.class, decoder.lookup(new byte[][] {key}, 0, 1));
        assertEquals("m", lookup.key().modelName());
        assertEquals(1, lookup.key().worldSize());
        assertEquals(CacheKey.NO_WORKER, lookup.key().workerId());
        assertEquals(3, lookup.key().end());
        assertEquals("", lookup.key().cacheSalt());
        assertEquals(1, lookup.tpSize());
    }

    @Test
    void requestConfigsKeepTheLoadControlsAndSkipTheRest() throws Exception {
        byte[] key = pack(p -> {
            p.packMapHeader(2);
            p.packString("token_ids").packArrayHeader(1).packInt(1);
            p.packString("request_configs").packMapHeader(5);
            p.packString("lmcache.skip_save").packBoolean(true);
            p.packString("lmcache.skip_load").packBoolean(true);
            p.packString("lmcache.hint.engine_computed_tokens").packInt(300);
            p.packInt(7).packString("a non-string name");
            p.packString("lmcache.tag").packMapHeader(1).packString("x").packInt(1);
        });
        CacheKey decoded = assertInstanceOf(Request.Lookup.class, decoder.lookup(new byte[][] {key}, 0, 1)).key();
        assertEquals(new RequestConfigs(true, 300), decoded.requestConfigs());
        byte[] oddTypes = pack(p -> {
            p.packMapHeader(1);
            p.packString("request_configs").packMapHeader(2);
            p.packString("lmcache.skip_load").packString("yes");
            p.packString("lmcache.hint.engine_computed_tokens").packInt(-5);
        });
        assertEquals(RequestConfigs.NONE, assertInstanceOf(Request.Lookup.class, decoder.lookup(new byte[][] {oddTypes}, 0, 1)).key()
                .requestConfigs(), "a string or a negative count is no control");
        byte[] nil = pack(p -> p.packMapHeader(1).packString("request_configs").packNil());
        assertEquals(RequestConfigs.NONE, assertInstanceOf(Request.Lookup.class, decoder.lookup(new byte[][] {nil}, 0, 1)).key()
                .requestConfigs());
    }

    @Test
    void requiredFramesMissingIsAnError() {
        ProtocolException e = assertThrows(ProtocolException.class, () -> decoder.store(new byte[][] {key()}, 0, 1));
        assertEquals(ProtocolException.Reason.MISSING_FRAMES, e.reason());
    }

    @Test
    void truncatedMsgpackIsMalformed() {
        byte[] whole = key();
        byte[] truncated = Arrays.copyOf(whole, whole.length / 2);
        ProtocolException e = assertThrows(ProtocolException.class, () -> decoder.lookup(new byte[][] {truncated}, 0, 1));
        assertTrue(e.reason() == ProtocolException.Reason.MALFORMED_MSGPACK || e.reason() == ProtocolException.Reason.OVERSIZED, e.toString());
    }

    @Test
    void wrongTypesAreRejected() {
        byte[][] frames = {pack(p -> p.packString("not-an-int"))};
        ProtocolException e = assertThrows(ProtocolException.class, () -> decoder.unregisterKvCache(frames, 0, 1));
        assertEquals(ProtocolException.Reason.WRONG_TYPE, e.reason());
        byte[][] boolAsRequestId = {pack(p -> p.packBoolean(true))};
        assertThrows(ProtocolException.class, () -> decoder.queryPrefetchStatus(boolAsRequestId, 0, 1));
    }

    @Test
    void aFrameDeclaringA100MegabyteStringCostsNothing() {
        // str32 header declaring 100 MB, followed by three bytes
        byte[] frame = HexFormat.of().parseHex("db05f5e100616263");
        ProtocolException e = assertThrows(ProtocolException.class, () -> decoder.queryPrefetchStatus(new byte[][] {frame}, 0, 1));
        assertEquals(ProtocolException.Reason.OVERSIZED, e.reason());
        // an array32 declaring 2^31-1 elements
        byte[] array = HexFormat.of().parseHex("dd7fffffff01");
        assertThrows(ProtocolException.class, () -> decoder.unregisterKvCache(new byte[][] {array}, 0, 1));
    }

    @Test
    void unknownExtensionTypeIsRejected() {
        byte[][] frames = {pack(p -> p.packLong(1)), pack(p -> p.packArrayHeader(1).packExtensionTypeHeader((byte) 7, 3).writePayload(new byte[3]))};
        ProtocolException e = assertThrows(ProtocolException.class, () -> decoder.registerKvCache(frames, 0, 2));
        assertEquals(ProtocolException.Reason.BAD_EXTENSION, e.reason());
    }

    @Test
    void trailingBytesAfterAValueAreMalformed() {
        byte[] frame = HexFormat.of().parseHex("a178c0");
        ProtocolException e = assertThrows(ProtocolException.class, () -> decoder.queryPrefetchStatus(new byte[][] {frame}, 0, 1));
        assertEquals(ProtocolException.Reason.MALFORMED_MSGPACK, e.reason());
    }

    @Test
    void randomFramesNeverEscapeAsAnythingButProtocolException() {
        Random random = new Random(7);
        for (Op op : Op.values()) {
            RequestDecoder.PayloadDecoder<?> decode = TestDecoders.of(op);
            if (decode == null) {
                continue;
            }
            for (int i = 0; i < 300; i++) {
                byte[][] frames = new byte[random.nextInt(8)][];
                for (int f = 0; f < frames.length; f++) {
                    frames[f] = new byte[random.nextInt(40)];
                    random.nextBytes(frames[f]);
                }
                try {
                    decode.decode(decoder, frames, 0, frames.length);
                } catch (ProtocolException expected) {
                    // fine: bad input is reported, never thrown as anything else
                }
            }
        }
    }

    private static byte[] key() {
        return pack(p -> {
            p.packMapHeader(3);
            p.packString("model_name").packString("m");
            p.packString("token_ids").packArrayHeader(2).packInt(1).packInt(2);
            p.packString("worker_id").packInt(0);
        });
    }

    interface Writer {
        void write(MessageBufferPacker packer) throws IOException;
    }

    static byte[] pack(Writer writer) {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            writer.write(packer);
            return packer.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
