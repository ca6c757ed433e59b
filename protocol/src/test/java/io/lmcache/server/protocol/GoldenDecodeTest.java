package io.lmcache.server.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.protocol.testing.Golden;
import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.Value;
import org.msgpack.value.ValueFactory;

/**
 * Every request frame the real LMCache client sent (testdata/golden) decodes into the right
 * record, and the record's fields agree with an independent generic msgpack decode of the frame.
 */
class GoldenDecodeTest {

    static Stream<Golden.Message> clientMessages() {
        List<Golden.Message> all = Golden.loadAll();
        assertFalse(all.isEmpty(), "no golden frames");
        return all.stream().filter(Golden.Message::clientToServer);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("clientMessages")
    void everyGoldenRequestDecodes(Golden.Message message) throws Exception {
        RequestDecoder decoder = new RequestDecoder();
        Op op = decoder.decodeOp(message.frames()[1]);
        assertNotNull(op, "op of " + message);
        assertEquals(message.op(), op.wireName());
        Request request = decoder.decode(op, message.frames(), 2, message.frames().length);
        assertEquals(op, request.op());
        crossCheck(message, request);
    }

    /** Field by field against msgpack-core's generic decoder, which shares no code with ours. */
    private static void crossCheck(Golden.Message m, Request request) throws IOException {
        switch (request) {
            case Request.Store store -> {
                checkKey(generic(m.payload(0)), store.key());
                assertEquals(generic(m.payload(1)).asIntegerValue().asLong(), store.instanceId());
                checkBlocks(generic(m.payload(2)), store.blockIds());
                assertArrayEquals(generic(m.payload(3)).asBinaryValue().asByteArray(), store.eventHandle());
            }
            case Request.Retrieve retrieve -> {
                checkKey(generic(m.payload(0)), retrieve.key());
                assertEquals(generic(m.payload(1)).asIntegerValue().asLong(), retrieve.instanceId());
                checkBlocks(generic(m.payload(2)), retrieve.blockIds());
                assertEquals(64, retrieve.eventHandle().length);
                assertEquals(generic(m.payload(4)).asIntegerValue().asInt(), retrieve.skipFirstNTokens());
            }
            case Request.Lookup lookup -> {
                checkKey(generic(m.payload(0)), lookup.key());
                assertFalse(lookup.key().hasWorker(), "a LOOKUP key has worker_id None");
            }
            case Request.FreeLookupLocks free -> checkKey(generic(m.payload(0)), free.key());
            case Request.PrepareStore prepare -> checkKey(generic(m.payload(0)), prepare.key());
            case Request.PrepareRetrieve prepare -> checkKey(generic(m.payload(0)), prepare.key());
            case Request.CommitRetrieve commit -> checkKey(generic(m.payload(0)), commit.key());
            case Request.CommitStore commit -> {
                checkKey(generic(m.payload(0)), commit.key());
                assertEquals(0, commit.data().length, "the shm path commits with b''");
            }
            case Request.QueryPrefetchStatus query -> assertEquals(generic(m.payload(0)).asStringValue().asString(), query.requestId());
            case Request.EndSession end -> assertEquals(generic(m.payload(0)).asStringValue().asString(), end.requestId());
            case Request.Ping ping -> {
                Value id = generic(m.payload(0));
                assertEquals(id.isNilValue(), ping.untracked());
                if (!id.isNilValue()) {
                    assertEquals(id.asIntegerValue().asLong(), ping.instanceId());
                }
            }
            case Request.RegisterKvCache register -> {
                assertEquals(generic(m.payload(0)).asIntegerValue().asLong(), register.instanceId());
                assertEquals(generic(m.payload(1)).asArrayValue().size(), register.kvCaches().size());
                assertEquals(generic(m.payload(2)).asStringValue().asString(), register.modelName());
                assertEquals(generic(m.payload(3)).asIntegerValue().asInt(), register.worldSize());
                assertEquals("vllm", register.engineType());
                for (TensorWrapper wrapper : register.kvCaches()) {
                    assertFalse(wrapper instanceof TensorWrapper.Unsupported, "wrapper " + wrapper);
                    assertEquals(wrapper.shape().length, wrapper.stride().length);
                }
            }
            case Request.RegisterEngineDrivenContext register -> {
                Map<Value, Value> map = generic(m.payload(0)).asMapValue().map();
                assertEquals(map.get(str("instance_id")).asIntegerValue().asLong(), register.registration().instanceId());
                assertEquals(map.get(str("num_layers")).asIntegerValue().asInt(), register.registration().numLayers());
                assertEquals(map.get(str("hidden_dim_size")).asIntegerValue().asInt(), register.registration().hiddenDimSize());
                assertEquals(map.get(str("dtype_str")).asStringValue().asString(), register.registration().dtypeStr());
            }
            default -> {
                // the remaining ops carry no fields worth cross-checking (or none at all)
            }
        }
    }

    private static void checkKey(Value generic, CacheKey key) {
        Map<Value, Value> map = generic.asMapValue().map();
        assertEquals(map.get(str("model_name")).asStringValue().asString(), key.modelName());
        assertEquals(map.get(str("world_size")).asIntegerValue().asInt(), key.worldSize());
        Value worker = map.get(str("worker_id"));
        assertEquals(worker.isNilValue() ? CacheKey.NO_WORKER : worker.asIntegerValue().asInt(), key.workerId());
        List<Value> tokens = map.get(str("token_ids")).asArrayValue().list();
        assertEquals(tokens.size(), key.tokenIds().length);
        for (int i = 0; i < tokens.size(); i++) {
            assertEquals(tokens.get(i).asIntegerValue().asInt(), key.tokenIds()[i]);
        }
        assertEquals(map.get(str("start")).asIntegerValue().asInt(), key.start());
        assertEquals(map.get(str("end")).asIntegerValue().asInt(), key.end());
        assertEquals(map.get(str("request_id")).asStringValue().asString(), key.requestId());
        assertEquals(map.get(str("cache_salt")).asStringValue().asString(), key.cacheSalt());
        assertEquals(map.get(str("num_kv_readers")).asIntegerValue().asInt(), key.numKvReaders());
    }

    private static void checkBlocks(Value generic, int[][] blocks) {
        List<Value> groups = generic.asArrayValue().list();
        assertEquals(groups.size(), blocks.length);
        for (int g = 0; g < groups.size(); g++) {
            List<Value> ids = groups.get(g).asArrayValue().list();
            assertEquals(ids.size(), blocks[g].length);
            for (int i = 0; i < ids.size(); i++) {
                assertEquals(ids.get(i).asIntegerValue().asInt(), blocks[g][i]);
            }
        }
    }

    private static Value str(String s) {
        return ValueFactory.newString(s);
    }

    private static Value generic(byte[] frame) throws IOException {
        try (MessageUnpacker unpacker = MessagePack.newDefaultUnpacker(frame)) {
            return unpacker.unpackValue();
        }
    }

    @Test
    void cpuWrappersDecodeToTheirFields() throws Exception {
        Golden.Message register = Golden.load("cpu_roundtrip.jsonl").getFirst();
        Request.RegisterKvCache request = (Request.RegisterKvCache) new RequestDecoder()
                .decode(Op.REGISTER_KV_CACHE, register.frames(), 2, register.frames().length);
        assertEquals(4, request.kvCaches().size());
        TensorWrapper.CpuShm first = assertInstanceOf(TensorWrapper.CpuShm.class, request.kvCaches().getFirst());
        assertTrue(first.shmName().matches("/lmcache_kv_\\d+_0"), first.shmName());
        assertEquals(786432, first.nbytes());
        assertEquals(DType.BFLOAT16, first.dtype());
        assertArrayEquals(new long[] {2, 96, 16, 2, 64}, first.shape());
        assertArrayEquals(new long[] {196608, 2048, 128, 64, 1}, first.stride());
        assertEquals(0, first.storageOffset());
        assertEquals("cpu", first.deviceUuid());
        assertEquals("NHD", request.layoutHints().kvLayout());
        assertTrue(request.engineGroups().isEmpty());
    }

    /** A worker re-registers after a heartbeat recovery with the same wrappers: they must compare equal, so it is a no-op. */
    @Test
    void reRegisteredWrappersCompareEqual() throws Exception {
        List<Request.RegisterKvCache> registers = Golden.load("reregister.jsonl").stream()
                .filter(m -> m.clientToServer() && m.op().equals("register_kv_cache"))
                .map(m -> {
                    try {
                        return (Request.RegisterKvCache) new RequestDecoder().decode(Op.REGISTER_KV_CACHE, m.frames(), 2, m.frames().length);
                    } catch (ProtocolException e) {
                        throw new AssertionError(e);
                    }
                }).toList();
        assertEquals(2, registers.size());
        assertEquals(registers.get(0).kvCaches(), registers.get(1).kvCaches());
        assertEquals(registers.get(0).kvCaches().hashCode(), registers.get(1).kvCaches().hashCode());
        Golden.Message other = Golden.load("cpu_roundtrip.jsonl").getFirst();
        Request.RegisterKvCache different = (Request.RegisterKvCache) new RequestDecoder()
                .decode(Op.REGISTER_KV_CACHE, other.frames(), 2, other.frames().length);
        assertFalse(registers.get(0).kvCaches().equals(different.kvCaches()));
    }

    @Test
    void gpuWrappersDecodeToTheirFields() throws Exception {
        int cuda = 0;
        int raw = 0;
        for (Golden.Message m : Golden.load("gpu_worker.jsonl")) {
            if (!m.clientToServer() || !m.op().equals("register_kv_cache")) {
                continue;
            }
            Request.RegisterKvCache request = (Request.RegisterKvCache) new RequestDecoder()
                    .decode(Op.REGISTER_KV_CACHE, m.frames(), 2, m.frames().length);
            for (TensorWrapper wrapper : request.kvCaches()) {
                switch (wrapper) {
                    case TensorWrapper.CudaIpc ipc -> {
                        cuda++;
                        assertEquals(64, ipc.handle().memHandle().length);
                        assertEquals('c', ipc.handle().segmentType());
                        assertEquals(64, ipc.handle().eventHandle().length);
                        assertFalse(ipc.deviceUuid().startsWith("GPU-"));
                    }
                    case TensorWrapper.RawCudaIpc rawIpc -> {
                        raw++;
                        assertEquals(64, rawIpc.memHandle().length);
                        assertTrue(rawIpc.nbytes() > 0);
                    }
                    default -> throw new AssertionError("unexpected wrapper " + wrapper);
                }
            }
        }
        assertTrue(cuda > 0, "golden gpu_worker has CudaIPCWrapper registrations");
        assertTrue(raw > 0, "golden gpu_worker has RawCudaIPCWrapper registrations");
    }
}
