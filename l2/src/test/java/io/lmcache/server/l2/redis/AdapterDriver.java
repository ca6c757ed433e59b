package io.lmcache.server.l2.redis;

import static org.awaitility.Awaitility.await;

import io.lmcache.server.l2.AsyncL2Adapter;
import io.lmcache.server.l2.Bitmap;
import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2AdapterSpecs;
import io.lmcache.server.l2.L2Adapters;
import io.lmcache.server.l2.L2Hash;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.l2.StoreResult;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;

/** Drives an adapter the way the controllers do: submit, then poll the one-shot result (bounded). */
final class AdapterDriver implements AutoCloseable {
    static final Duration ANSWER = Duration.ofSeconds(20);
    private final Arena arena = Arena.ofShared();
    private final List<L2Adapter> adapters = new ArrayList<>();

    L2Adapter adapter(String json) throws Exception {
        L2Adapter adapter = L2Adapters.create(L2AdapterSpecs.parse(json, Map.of()),
                Thread.ofPlatform().daemon().name("test-redis-", 0).factory());
        adapters.add(adapter);
        return adapter;
    }

    static void awaitConnected(L2Adapter adapter) {
        await("connected").atMost(ANSWER).pollInterval(Duration.ofMillis(20)).until(() -> (Boolean) adapter.status().get("connected"));
    }

    /** The adapter's Redis I/O, for its wire keys and breakers. */
    static RedisIo redis(L2Adapter adapter) {
        return (RedisIo) ((AsyncL2Adapter) adapter).io();
    }

    static L2Key key(int i) {
        return L2Key.of("org/model", L2Key.packKvRank(1, 0), 0, new L2Hash(0x1234_5678_0000L + i, 0x9abcL * (i + 1), 0, 0), "");
    }

    static List<L2Key> keys(int from, int count) {
        List<L2Key> keys = new ArrayList<>();
        for (int i = from; i < from + count; i++) {
            keys.add(key(i));
        }
        return keys;
    }

    MemorySegment filled(long seed, int bytes) {
        MemorySegment segment = arena.allocate(bytes, 64);
        byte[] data = new byte[bytes];
        new Random(seed).nextBytes(data);
        MemorySegment.copy(data, 0, segment, ValueLayout.JAVA_BYTE, 0, bytes);
        return segment;
    }

    List<MemorySegment> filled(int from, int count, int bytes) {
        List<MemorySegment> out = new ArrayList<>();
        for (int i = from; i < from + count; i++) {
            out.add(filled(i, bytes));
        }
        return out;
    }

    List<MemorySegment> blank(int count, int bytes, byte fill) {
        List<MemorySegment> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            out.add(arena.allocate(bytes, 64).fill(fill));
        }
        return out;
    }

    static StoreResult store(L2Adapter adapter, List<L2Key> keys, List<MemorySegment> objects) {
        long task = adapter.submitStore(keys, objects);
        StoreResult[] result = new StoreResult[1];
        await("store " + task).atMost(ANSWER).pollInterval(Duration.ofMillis(5)).until(() -> {
            result[0] = adapter.popCompletedStores().get(task);
            return result[0] != null;
        });
        return result[0];
    }

    static Bitmap lookup(L2Adapter adapter, List<L2Key> keys) {
        long task = adapter.submitLookupAndLock(keys, Map.of());
        Bitmap[] result = new Bitmap[1];
        await("lookup " + task).atMost(ANSWER).pollInterval(Duration.ofMillis(5)).until(() -> (result[0] = adapter.queryLookupAndLock(task))
                != null);
        return result[0];
    }

    static Bitmap load(L2Adapter adapter, List<L2Key> keys, List<MemorySegment> buffers) {
        long task = adapter.submitLoad(keys, buffers);
        Bitmap[] result = new Bitmap[1];
        await("load " + task).atMost(ANSWER).pollInterval(Duration.ofMillis(5)).until(() -> (result[0] = adapter.queryLoad(task)) != null);
        return result[0];
    }

    @Override
    public void close() {
        adapters.forEach(L2Adapter::close);
        arena.close();
    }
}
