package io.lmcache.server.testing;

import static io.lmcache.server.testing.TestClient.pack;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.Value;
import org.msgpack.value.ValueFactory;

/**
 * An engine-driven worker as LMCache's own engine-driven client behaves (protocol doc §7.3): it
 * registers its geometry, maps the server's whole L1 pool from /dev/shm, and copies chunk objects
 * into the slots PREPARE_STORE hands out and out of those PREPARE_RETRIEVE hands out.
 */
public final class EngineDrivenWorker implements AutoCloseable {
    /** One slot of the pool as the server described it. */
    public record Slot(long offset, long length, List<Integer> shape, String dtype) {}

    private final TestClient client;
    private final long instanceId;
    private final String model;
    private final int layers;
    private final int hidden;
    private final Arena arena = Arena.ofShared();
    private MemorySegment pool;
    private String shmName;

    public EngineDrivenWorker(String endpoint, long instanceId, String model, int layers, int hidden) {
        this.client = new TestClient(endpoint);
        this.instanceId = instanceId;
        this.model = model;
        this.layers = layers;
        this.hidden = hidden;
    }

    public TestClient client() {
        return client;
    }

    public String shmName() {
        return shmName;
    }

    /** REGISTER_…_ENGINE_DRIVEN_CONTEXT with all 9 keys in the client's order; maps the pool it names. */
    public void register() {
        TestClient.Reply reply = client.call(14, pack(p -> {
            p.packMapHeader(9);
            p.packString("instance_id").packLong(instanceId);
            p.packString("model_name").packString(model);
            p.packString("world_size").packInt(1);
            p.packString("block_size").packInt(16);
            p.packString("num_layers").packInt(layers);
            p.packString("hidden_dim_size").packInt(hidden);
            p.packString("dtype_str").packString("bfloat16");
            p.packString("use_mla").packBoolean(false);
            p.packString("num_physical_slots").packInt(256);
        }));
        Value map = unpack(reply.payload());
        shmName = get(map, "shm_name").asStringValue().asString();
        long poolSize = get(map, "pool_size").asIntegerValue().asLong();
        if (shmName.isEmpty() || poolSize <= 0) {
            throw new AssertionError("the server offered no shared pool: " + map);
        }
        try (FileChannel channel = FileChannel.open(Path.of("/dev/shm", shmName.replaceFirst("^/", "")), StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            pool = channel.map(FileChannel.MapMode.READ_WRITE, 0, channel.size(), arena);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public void unregister() {
        client.call(15, pack(p -> p.packLong(instanceId)));
    }

    public byte[] key(int[] tokens, int start, int end, String requestId) {
        return JavaWorker.cacheKey(model, new JavaWorker.KeyTokens(tokens, start, end), requestId, 0, 1, 1);
    }

    /** PREPARE_STORE: the slots to fill and, per slot, the chunk's index in the range. */
    public record Prepared(List<Slot> slots, List<Integer> chunkIndices) {}

    public Prepared prepareStore(int[] tokens, int start, int end, String requestId) {
        Value reply = unpack(client.call(16, key(tokens, start, end, requestId), pack(p -> p.packLong(instanceId))).payload());
        Value context = get(reply, "context");
        List<Integer> indices = new ArrayList<>();
        for (Value index : get(context, "chunk_indices").asArrayValue()) {
            indices.add(index.asIntegerValue().asInt());
        }
        return new Prepared(slots(get(context, "slots")), indices);
    }

    public boolean commitStore(int[] tokens, int start, int end, String requestId) {
        return "c3".equals(client.call(17, key(tokens, start, end, requestId), pack(p -> p.packLong(instanceId)),
                pack(p -> p.packBinaryHeader(0))).payloadHex());
    }

    /** PREPARE_RETRIEVE: the slots of every chunk, or null on a miss. */
    public List<Slot> prepareRetrieve(int[] tokens, int start, int end, String requestId) {
        Value reply = unpack(client.call(18, key(tokens, start, end, requestId), pack(p -> p.packLong(instanceId))).payload());
        if (!get(reply, "success").asBooleanValue().getBoolean()) {
            return null;
        }
        return slots(get(get(reply, "context"), "slots"));
    }

    public boolean commitRetrieve(int[] tokens, int start, int end, String requestId) {
        return "c3".equals(client.call(19, key(tokens, start, end, requestId), pack(p -> p.packLong(instanceId))).payloadHex());
    }

    public void write(Slot slot, byte[] bytes) {
        MemorySegment.copy(bytes, 0, pool, ValueLayout.JAVA_BYTE, slot.offset(), (int) slot.length());
    }

    public byte[] read(Slot slot) {
        byte[] out = new byte[(int) slot.length()];
        MemorySegment.copy(pool, ValueLayout.JAVA_BYTE, slot.offset(), out, 0, out.length);
        return out;
    }

    public long objectBytes() {
        return 2L * layers * 256 * hidden * 2;
    }

    private static List<Slot> slots(Value value) {
        List<Slot> slots = new ArrayList<>();
        if (value == null) {
            return slots;
        }
        for (Value slot : value.asArrayValue()) {
            List<Integer> shape = new ArrayList<>();
            for (Value dim : get(slot, "shape").asArrayValue()) {
                shape.add(dim.asIntegerValue().asInt());
            }
            slots.add(new Slot(get(slot, "offset").asIntegerValue().asLong(), get(slot, "length").asIntegerValue().asLong(), shape,
                    get(slot, "dtype").asStringValue().asString()));
        }
        return slots;
    }

    static Value get(Value map, String key) {
        return map.asMapValue().map().get(ValueFactory.newString(key));
    }

    static Value unpack(byte[] frame) {
        if (frame == null) {
            throw new AssertionError("a reply with no payload where a map was expected");
        }
        try (MessageUnpacker unpacker = MessagePack.newDefaultUnpacker(frame)) {
            return unpacker.unpackValue();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public void close() {
        client.close();
        arena.close();
    }
}
