package io.lmcache.server.testing;

import static io.lmcache.server.testing.TestClient.pack;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.IntStream;
import org.msgpack.core.MessageBufferPacker;

/**
 * A CPU vLLM worker in Java for the integration tests: per layer a FlashAttention NHD tensor
 * {@code [2, nb, bs, nh, hs]} (bf16) in its own POSIX shared-memory segment, registered with
 * wrappers pickled byte-identically to LMCache's client ({@link WrapperPickler}), and requests
 * framed as the client frames them.
 */
public final class JavaWorker implements AutoCloseable {
    private static final AtomicInteger SEGMENTS = new AtomicInteger();
    private static final byte[] ZERO_EVENT = new byte[64];

    /** The KV geometry: bytes per block piece are {@code blockSize * heads * headSize * 2}. */
    public record Geometry(int layers, int blocks, int blockSize, int heads, int headSize) {
        public long pieceBytes() {
            return (long) blockSize * heads * headSize * 2;
        }

        public long tensorBytes() {
            return 2L * blocks * pieceBytes();
        }

        public long chunkObjectBytes(int chunkSize) {
            return 2L * layers * (chunkSize / blockSize) * pieceBytes();
        }
    }

    /**
     * The vLLM layout of the worker's per-layer tensors (protocol doc §6.4); every one holds {@link Geometry#tensorBytes} bytes.
     * {@link #elementOffset} is where one element of K or V sits: the definition the layout tests check the objects against.
     */
    public enum Layout {
        /** FlashAttention {@code [2, nb, bs, nh, hs]}. */
        NHD("NHD"),
        /** FlashAttention HND {@code [2, nb, nh, bs, hs]}. */
        HND("HND"),
        /** Fused K/V {@code [nb, bs, nh, 2*hs]}: each head's K then V. */
        FUSED("NHD"),
        /** Fused K/V HND {@code [nb, nh, bs, 2*hs]}. */
        FUSED_HND("HND");

        private final String hint;

        Layout(String hint) {
            this.hint = hint;
        }

        long[] shape(Geometry g) {
            return switch (this) {
                case NHD -> new long[] {2, g.blocks(), g.blockSize(), g.heads(), g.headSize()};
                case HND -> new long[] {2, g.blocks(), g.heads(), g.blockSize(), g.headSize()};
                case FUSED -> new long[] {g.blocks(), g.blockSize(), g.heads(), 2L * g.headSize()};
                case FUSED_HND -> new long[] {g.blocks(), g.heads(), g.blockSize(), 2L * g.headSize()};
            };
        }

        /** Element index (not bytes) of plane {@code plane} (K 0, V 1), block, token row, head and element {@code d} of the head. */
        public long elementOffset(Geometry g, int plane, int block, int row, int head, int d) {
            long hs = g.headSize();
            return switch (this) {
                case NHD -> ((((long) plane * g.blocks() + block) * g.blockSize() + row) * g.heads() + head) * hs + d;
                case HND -> ((((long) plane * g.blocks() + block) * g.heads() + head) * g.blockSize() + row) * hs + d;
                case FUSED -> (((long) block * g.blockSize() + row) * g.heads() + head) * 2 * hs + plane * hs + d;
                case FUSED_HND -> (((long) block * g.heads() + head) * g.blockSize() + row) * 2 * hs + plane * hs + d;
            };
        }
    }

    private final TestClient client;
    private final long instanceId;
    private final Layout layout;
    private final String model;
    private String salt = "";
    private final Geometry geometry;
    private final Arena arena = Arena.ofShared();
    private final List<Path> paths = new ArrayList<>();
    private final List<MemorySegment> tensors = new ArrayList<>();

    public JavaWorker(String endpoint, long instanceId, String model, Geometry geometry) {
        this(endpoint, instanceId, model, geometry, Layout.NHD);
    }

    /** A worker of another layout (its tensors as large as NHD ones); {@link #fill}, {@link #read} and {@link #zero} are NHD's only. */
    public JavaWorker(String endpoint, long instanceId, String model, Geometry geometry, Layout layout) {
        this.layout = layout;
        this.client = new TestClient(endpoint);
        this.instanceId = instanceId;
        this.model = model;
        this.geometry = geometry;
        try {
            for (int layer = 0; layer < geometry.layers(); layer++) {
                Path path = Path.of("/dev/shm", "lmcache_kv_" + ProcessHandle.current().pid() + "_jw" + SEGMENTS.getAndIncrement());
                try (FileChannel channel = FileChannel.open(path, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                        StandardOpenOption.WRITE)) {
                    channel.write(ByteBuffer.wrap(new byte[1]), geometry.tensorBytes() - 1);
                    tensors.add(channel.map(FileChannel.MapMode.READ_WRITE, 0, geometry.tensorBytes(), arena));
                }
                paths.add(path);
            }
        } catch (IOException e) {
            close();
            throw new UncheckedIOException(e);
        }
    }

    public TestClient client() {
        return client;
    }

    public long instanceId() {
        return instanceId;
    }

    public List<Path> segments() {
        return paths;
    }

    /** Layer {@code layer}'s tensor, mapped here (the layout tests write and read elements by {@link Layout#elementOffset}). */
    public MemorySegment tensor(int layer) {
        return tensors.get(layer);
    }

    /** REGISTER_KV_CACHE with the 7 payload frames of the newest client; fails unless the reply has no payload. */
    public void register() {
        register(0);
    }

    /**
     * The same with {@code engineGroups} engine group infos (0: none, one group): layer {@code i} in group {@code i % engineGroups},
     * every group full attention with the geometry's block size (each its own kernel group and, by default, object group).
     */
    public void register(int engineGroups) {
        register(client, instanceId, model, new Tensors(geometry, layout), paths.stream().map(path -> "/" + path.getFileName()).toList(), engineGroups,
                -1);
    }

    /**
     * A hybrid registration: two engine groups (even layers full attention, odd layers a sliding window of {@code windowTokens}
     * tokens, LMCache's {@code sw_size_tokens}), each its own object group by default. STORE it with {@link #store(int[], int, int,
     * int[][], String)}.
     */
    public void registerSlidingWindow(int windowTokens) {
        register(client, instanceId, model, new Tensors(geometry, Layout.NHD), paths.stream().map(path -> "/" + path.getFileName()).toList(), 2,
                windowTokens);
    }

    /**
     * A REGISTER of {@code instanceId} from {@code client} whose layers are the segments {@code names} name, one wrapper each of
     * {@code geometry}'s tensor size (its layer count is ignored: there are as many layers as names). The server answers None
     * whether it accepts the tensors or not; anything else fails.
     */
    public static void register(TestClient client, long instanceId, String model, Geometry geometry, List<String> names) {
        register(client, instanceId, model, new Tensors(geometry, Layout.NHD), names, 0, -1);
    }

    /** What a REGISTER describes of the tensors: their geometry and layout. */
    private record Tensors(Geometry geometry, Layout layout) {}

    private static void register(TestClient client, long instanceId, String model, Tensors described, List<String> names,
            int engineGroups, int windowTokens) {
        Geometry geometry = described.geometry();
        Layout layout = described.layout();
        long[] shape = layout.shape(geometry);
        long[] stride = new long[shape.length];
        long step = 1;
        for (int i = shape.length - 1; i >= 0; i--) {
            stride[i] = step;
            step *= shape[i];
        }
        byte[] wrappers = pack(p -> {
            p.packArrayHeader(names.size());
            for (String name : names) {
                byte[] pickle = WrapperPickler.cpuShm(name, geometry.tensorBytes(), "bfloat16", shape, stride, 0);
                p.packExtensionTypeHeader((byte) 1, pickle.length).writePayload(pickle);
            }
        });
        TestClient.Reply reply = client.call(1, pack(p -> p.packLong(instanceId)), wrappers, pack(p -> p.packString(model)),
                pack(p -> p.packInt(1)), pack(p -> p.packString("vllm")),
                pack(p -> p.packMapHeader(1).packString("kv_layout").packString(layout.hint)), pack(p -> {
                    p.packArrayHeader(engineGroups);
                    for (int g = 0; g < engineGroups; g++) {
                        boolean windowed = windowTokens > 0 && g == 1;
                        p.packMapHeader(windowed ? 4 : 3).packString("engine_group_id").packInt(g).packString("tokens_per_block")
                                .packInt(geometry.blockSize());
                        if (windowed) {
                            p.packString("sw_size_tokens").packInt(windowTokens);
                        }
                        p.packString("layer_indices");
                        int group = g;
                        int[] layers = IntStream.range(0, names.size()).filter(l -> l % engineGroups == group).toArray();
                        p.packArrayHeader(layers.length);
                        for (int layer : layers) {
                            p.packInt(layer);
                        }
                    }
                }));
        if (reply.payload() != null) {
            throw new AssertionError("REGISTER replied with a payload: " + reply.payloadHex());
        }
    }

    public void unregister() {
        client.call(2, pack(p -> p.packLong(instanceId)));
    }

    public boolean ping() {
        return "c3".equals(client.call(22, pack(p -> p.packLong(instanceId))).payloadHex());
    }

    /** An IPCCacheServerKey map of this worker's model. */
    public byte[] key(int[] tokens, int start, int end, String requestId, Integer workerId, int worldSize, int readers) {
        return cacheKey(model, salt, new KeyTokens(tokens, start, end), requestId, workerId, worldSize, readers);
    }

    /** The cache salt (tenant) of this worker's keys from now on; "" by default. */
    public JavaWorker salt(String cacheSalt) {
        this.salt = cacheSalt;
        return this;
    }

    /** A key's tokens: the ids, and the range {@code [start, end)} of them the request covers. */
    public record KeyTokens(int[] ids, int start, int end) {}

    /** An IPCCacheServerKey map, every field in the client's order (a null worker id is nil, as in LOOKUP). */
    public static byte[] cacheKey(String model, KeyTokens range, String requestId, Integer workerId, int worldSize, int readers) {
        return cacheKey(model, "", range, requestId, workerId, worldSize, readers);
    }

    /** {@link #cacheKey} with a cache salt. */
    public static byte[] cacheKey(String model, String salt, KeyTokens range, String requestId, Integer workerId, int worldSize,
            int readers) {
        return cacheKey(model, salt, range, new KeyOwner(requestId, workerId, worldSize, readers), null);
    }

    /**
     * A scheduler LOOKUP key of this worker's model whose {@code request_configs} map carries {@code configs} (Boolean and Integer
     * values, as the connector's {@code kv_transfer_params}); null: nil.
     */
    public byte[] lookupKey(int[] tokens, int end, String requestId, Map<String, Object> configs) {
        return cacheKey(model, salt, new KeyTokens(tokens, 0, end), new KeyOwner(requestId, null, 1, 1), configs);
    }

    /** Who asks in a key: the request, the worker (null in a LOOKUP), its world size and the key's readers. */
    private record KeyOwner(String requestId, Integer workerId, int worldSize, int readers) {}

    private static byte[] cacheKey(String model, String salt, KeyTokens range, KeyOwner owner, Map<String, Object> configs) {
        int[] tokens = range.ids();
        int start = range.start();
        int end = range.end();
        String requestId = owner.requestId();
        Integer workerId = owner.workerId();
        int worldSize = owner.worldSize();
        int readers = owner.readers();
        return pack(p -> {
            p.packMapHeader(10);
            p.packString("model_name").packString(model);
            p.packString("world_size").packInt(worldSize);
            p.packString("worker_id");
            if (workerId == null) {
                p.packNil();
            } else {
                p.packInt(workerId);
            }
            p.packString("token_ids").packArrayHeader(tokens.length);
            for (int token : tokens) {
                p.packInt(token);
            }
            p.packString("start").packInt(start);
            p.packString("end").packInt(end);
            p.packString("request_id").packString(requestId);
            p.packString("cache_salt").packString(salt);
            p.packString("request_configs");
            if (configs == null) {
                p.packNil();
            } else {
                p.packMapHeader(configs.size());
                for (Map.Entry<String, Object> entry : configs.entrySet()) {
                    p.packString(entry.getKey());
                    if (entry.getValue() instanceof Boolean b) {
                        p.packBoolean(b);
                    } else {
                        p.packLong(((Number) entry.getValue()).longValue());
                    }
                }
            }
            p.packString("num_kv_readers").packInt(readers);
        });
    }

    private static byte[] blockList(int[] blocks) {
        return pack(p -> {
            p.packArrayHeader(1).packArrayHeader(blocks.length);
            for (int block : blocks) {
                p.packInt(block);
            }
        });
    }

    /** STORE; true when the reply is exactly {@code (64 zero bytes, True)}. */
    public boolean store(int[] tokens, int start, int end, int[] blocks, String requestId) {
        TestClient.Reply reply = client.call(6, key(tokens, start, end, requestId, 0, 1, 1), pack(p -> p.packLong(instanceId)),
                blockList(blocks), pack(p -> p.packBinaryHeader(64).writePayload(ZERO_EVENT)));
        return transferOk(reply);
    }

    /** STORE as kv rank {@code workerId} of {@code worldSize} (a TP worker). */
    public boolean store(int[] tokens, int start, int end, int[] blocks, String requestId, int workerId, int worldSize) {
        TestClient.Reply reply = client.call(6, key(tokens, start, end, requestId, workerId, worldSize, 1), pack(p -> p.packLong(instanceId)),
                blockList(blocks), pack(p -> p.packBinaryHeader(64).writePayload(ZERO_EVENT)));
        return transferOk(reply);
    }

    /** STORE with one block list per engine group (a hybrid registration). */
    public boolean store(int[] tokens, int start, int end, int[][] blocksPerGroup, String requestId) {
        byte[] blockIds = pack(p -> {
            p.packArrayHeader(blocksPerGroup.length);
            for (int[] blocks : blocksPerGroup) {
                p.packArrayHeader(blocks.length);
                for (int block : blocks) {
                    p.packInt(block);
                }
            }
        });
        TestClient.Reply reply = client.call(6, key(tokens, start, end, requestId, 0, 1, 1), pack(p -> p.packLong(instanceId)), blockIds,
                pack(p -> p.packBinaryHeader(64).writePayload(ZERO_EVENT)));
        return transferOk(reply);
    }

    public boolean retrieve(int[] tokens, int start, int end, int[] blocks, int skip, String requestId) {
        TestClient.Reply reply = client.call(7, key(tokens, start, end, requestId, 0, 1, 1), pack(p -> p.packLong(instanceId)),
                blockList(blocks), pack(p -> p.packBinaryHeader(64).writePayload(ZERO_EVENT)), pack(p -> p.packInt(skip)));
        return transferOk(reply);
    }

    private static boolean transferOk(TestClient.Reply reply) {
        String hex = reply.payloadHex();
        String prefix = "92c440" + "00".repeat(64);
        if (hex == null || !hex.startsWith(prefix) || hex.length() != prefix.length() + 2) {
            throw new AssertionError("not a (64-byte event, bool) reply: " + hex);
        }
        return hex.endsWith("c3");
    }

    /**
     * LOOKUP (scheduler: worker_id None) then QUERY_PREFETCH_STATUS until it answers a count (None while an L2 prefetch runs, 20 s
     * at most); returns the hit chunks. {@code readers} 0 is a probe: the server reads 0 as one read lock per hit (as LMCache
     * does), so the probe ends its session once it has the count, leaving nothing pinned.
     */
    public int lookup(int[] tokens, int end, String requestId, int worldSize, int readers) {
        int hits = lookupAndQuery(tokens, end, requestId, worldSize, readers);
        if (readers == 0) {
            endSession(requestId);
        }
        return hits;
    }

    /** LOOKUP and QUERY as {@link #lookup}, the session left open (its read locks held) whatever {@code readers} says. */
    public int lookupAndQuery(int[] tokens, int end, String requestId, int worldSize, int readers) {
        TestClient.Reply ack = client.call(8, key(tokens, 0, end, requestId, null, worldSize, readers), pack(p -> p.packInt(1)));
        if (ack.payload() != null) {
            throw new AssertionError("LOOKUP replied with a payload");
        }
        long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (true) {
            TestClient.Reply query = client.call(9, pack(p -> p.packString(requestId)));
            if (query.payload() != null) {
                return Integer.parseInt(query.payloadHex(), 16);
            }
            if (System.nanoTime() - deadlineNs > 0) {
                throw new AssertionError("QUERY_PREFETCH_STATUS of " + requestId + " still answers None after 20 s");
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
        }
    }

    public void freeLookupLocks(int[] tokens, int start, int end, String requestId) {
        client.call(12, key(tokens, start, end, requestId, null, 1, 1), pack(p -> p.packInt(1)));
    }

    public void endSession(String requestId) {
        client.call(13, pack(p -> p.packString(requestId)), pack(MessageBufferPacker::packNil));
    }

    /** END_SESSION with LMCache's {@code SessionEndInfo} (a map by field name, as msgspec encodes the dataclass). */
    public void endSession(String requestId, String finishReason, int stopTokenId) {
        client.call(13, pack(p -> p.packString(requestId)), pack(p -> p.packMapHeader(2).packString("finish_reason").packString(finishReason)
                .packString("stop_token_id").packInt(stopTokenId)));
    }

    /** Fills the given blocks (every layer, K and V) with a pattern derived from {@code seed}. */
    public void fill(int[] blocks, long seed) {
        Random random = new Random(seed);
        byte[] piece = new byte[(int) geometry.pieceBytes()];
        for (MemorySegment tensor : tensors) {
            for (int plane = 0; plane < 2; plane++) {
                for (int block : blocks) {
                    random.nextBytes(piece);
                    MemorySegment.copy(piece, 0, tensor, ValueLayout.JAVA_BYTE, pieceOffset(plane, block), piece.length);
                }
            }
        }
    }

    /**
     * Writes {@code value} (and the piece's place) into the first 16 bytes of every piece of the given
     * blocks: contents distinct per value at a fraction of {@link #fill}'s cost (the soak in bench/).
     */
    public void stamp(int[] blocks, long value) {
        for (int layer = 0; layer < tensors.size(); layer++) {
            for (int plane = 0; plane < 2; plane++) {
                for (int block : blocks) {
                    long offset = pieceOffset(plane, block);
                    tensors.get(layer).set(ValueLayout.JAVA_LONG_UNALIGNED, offset, value);
                    tensors.get(layer).set(ValueLayout.JAVA_LONG_UNALIGNED, offset + 8, ((long) layer << 40) | ((long) plane << 32) | block);
                }
            }
        }
    }

    public void zero(int[] blocks) {
        for (MemorySegment tensor : tensors) {
            for (int plane = 0; plane < 2; plane++) {
                for (int block : blocks) {
                    tensor.asSlice(pieceOffset(plane, block), geometry.pieceBytes()).fill((byte) 0);
                }
            }
        }
    }

    /** The bytes of the given blocks, every layer and plane, in one array (for comparisons). */
    public byte[] read(int[] blocks) {
        byte[] out = new byte[(int) (tensors.size() * 2L * blocks.length * geometry.pieceBytes())];
        int at = 0;
        for (MemorySegment tensor : tensors) {
            for (int plane = 0; plane < 2; plane++) {
                for (int block : blocks) {
                    MemorySegment.copy(tensor, ValueLayout.JAVA_BYTE, pieceOffset(plane, block), out, at, (int) geometry.pieceBytes());
                    at += (int) geometry.pieceBytes();
                }
            }
        }
        return out;
    }

    private long pieceOffset(int plane, int block) {
        return ((long) plane * geometry.blocks() + block) * geometry.pieceBytes();
    }

    public static int[] range(int from, int count) {
        int[] out = new int[count];
        for (int i = 0; i < count; i++) {
            out[i] = from + i;
        }
        return out;
    }

    public static int[] tokens(long seed, int count) {
        Random random = new Random(seed);
        int[] tokens = new int[count];
        for (int i = 0; i < count; i++) {
            tokens[i] = random.nextInt(150_000);
        }
        return tokens;
    }

    /** Unlinks the segments (as the real client does at exit) without unmapping ours. */
    public void unlinkSegments() {
        for (Path path : paths) {
            try {
                Files.deleteIfExists(path);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    @Override
    public void close() {
        client.close();
        unlinkSegments();
        arena.close();
    }
}
