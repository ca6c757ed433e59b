package io.lmcache.server.tier;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import io.lmcache.server.l2.L2Hash;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.metrics.L2Metrics;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.RequestConfigs;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ChunkKey;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.ReadyStores;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.transfer.ChunkHashes;
import io.lmcache.server.transfer.ObjectShape;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The warm prefetches against an in-memory adapter and a real L1 store: every key loaded, reported once, bounded, expiring. */
class WarmPrefetchesTest {
    private static final int CHUNK = 16;
    private static final int CHUNKS = 4;
    private static final long OBJECT_BYTES = 64 * 1024;
    private static final int FORMAT = 1;
    private static final int[] TOKENS = IntStream.range(0, CHUNK * CHUNKS).map(i -> i * 5 + 1).toArray();
    private final Arena arena = Arena.ofShared();
    private final byte[] hashes = ChunkHashes.of(new CacheKey("org/model", 1, 0, TOKENS, 0, TOKENS.length, "x", "", 0, RequestConfigs.NONE),
            CHUNK, CHUNKS);
    private final MemoryAdapter adapter = new MemoryAdapter();
    private ObjectStore store;
    private MemorySegment pool;
    private long nowNs;

    @AfterEach
    void close() {
        arena.close();
    }

    private WarmPrefetches warm(int objects) {
        long bytes = objects * OBJECT_BYTES;
        pool = arena.allocate(bytes, 4096);
        store = ReadyStores.lru(bytes, bytes);
        PrefetchContext ctx = new PrefetchContext(List.of(adapter), store, pool, CHUNK, PrefixFold.LEADING_RUN, false,
                new L2Metrics(new ServerMetrics()));
        return new WarmPrefetches(ctx, model -> model.equals("org/model") ? Map.of(1, List.of(new ObjectShape(0, OBJECT_BYTES, FORMAT)))
                : Map.of(), () -> { }, () -> nowNs);
    }

    private L2Key l2Key(int chunk, String salt) {
        ChunkHash hash = ChunkHash.unpack(hashes, chunk);
        return L2Key.of("org/model", L2Key.packKvRank(1, 0), 0, new L2Hash(hash.w0(), hash.w1(), hash.w2(), hash.w3()), salt);
    }

    private ChunkKey l1Key(int chunk, String salt) {
        return new ChunkKey("org/model", salt, 0, 0, ChunkHash.unpack(hashes, chunk));
    }

    private static byte[] pattern(int seed) {
        byte[] bytes = new byte[(int) OBJECT_BYTES];
        Arrays.fill(bytes, (byte) seed);
        return bytes;
    }

    /** Turns until there is nothing left to do (the adapter answers on the submitting thread). */
    private static void run(WarmPrefetches warm) {
        for (int turn = 0; turn < 10_000 && warm.doWork() > 0; turn++) {
            // the next turn
        }
    }

    private static String accepted(WarmPrefetches.Submitted submitted) {
        return assertInstanceOf(WarmPrefetches.Submitted.Accepted.class, submitted).requestId();
    }

    @Test
    void everyKeyNotInL1IsLoadedRetainedAndUnlockedAndTheResultIsReportedOnce() {
        WarmPrefetches warm = warm(8);
        for (int chunk : new int[] {0, 2, 3}) {
            adapter.data.put(l2Key(chunk, ""), pattern(chunk + 1));
        }
        adapter.data.put(l2Key(1, "tenant-a"), pattern(9)); // chunk 1 only under another salt: not this request's
        String id = accepted(warm.submit("org/model", 1, TOKENS, ""));
        assertInstanceOf(WarmPrefetches.Status.Pending.class, warm.poll(id));
        run(warm);
        WarmPrefetches.Status.Completed done = assertInstanceOf(WarmPrefetches.Status.Completed.class, warm.poll(id));
        assertEquals(3, done.foundKeys(), "no prefix fold: chunks 2 and 3 load past the gap at 1");
        assertEquals(CHUNKS, done.totalKeys());
        assertArrayEquals(new int[] {1}, done.missing());
        assertInstanceOf(WarmPrefetches.Status.Unknown.class, warm.poll(id), "reported once");
        assertEquals(0, adapter.lockedKeys(), "every L2 lock given back");
        for (int chunk : new int[] {0, 2, 3}) {
            StoredObject object = store.pinReady(l1Key(chunk, ""), OBJECT_BYTES, FORMAT);
            assertArrayEquals(pattern(chunk + 1), pool.asSlice(object.offset(), OBJECT_BYTES).toArray(ValueLayout.JAVA_BYTE), "chunk " + chunk);
            store.unpin(object, false);
        }

        // again, the three resident now: nothing is loaded, and they count as missing
        int loads = adapter.loadTasks;
        String again = accepted(warm.submit("org/model", 1, TOKENS, ""));
        run(warm);
        WarmPrefetches.Status.Completed second = assertInstanceOf(WarmPrefetches.Status.Completed.class, warm.poll(again));
        assertEquals(0, second.foundKeys());
        assertArrayEquals(new int[] {0, 1, 2, 3}, second.missing());
        assertEquals(loads, adapter.loadTasks, "the second prefetch loaded nothing");
        // retained and unlocked: an ordinary object, which a delete without force removes
        assertEquals(ObjectStore.DeleteOutcome.DELETED, store.delete(l1Key(0, ""), false));
        assertEquals(3L, warm.loadedKeys());
    }

    @Test
    void jobsHeldAreBoundedAndACompletedJobNobodyPollsExpires() {
        WarmPrefetches warm = warm(8);
        assertInstanceOf(WarmPrefetches.Submitted.NoLayout.class, warm.submit("other/model", 1, TOKENS, ""));
        assertInstanceOf(WarmPrefetches.Submitted.Noop.class, warm.submit("org/model", 1, Arrays.copyOf(TOKENS, CHUNK - 1), ""));
        String[] ids = new String[WarmPrefetches.MAX_JOBS];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = accepted(warm.submit("org/model", 1, TOKENS, ""));
        }
        assertInstanceOf(WarmPrefetches.Submitted.Full.class, warm.submit("org/model", 1, TOKENS, ""));
        run(warm);
        assertInstanceOf(WarmPrefetches.Status.Completed.class, warm.poll(ids[0]));
        accepted(warm.submit("org/model", 1, TOKENS, "")); // a poll freed a place
        assertInstanceOf(WarmPrefetches.Submitted.Full.class, warm.submit("org/model", 1, TOKENS, ""));
        run(warm);
        nowNs += WarmPrefetches.COMPLETED_TTL_NS + 2_000_000_000L;
        warm.doWork();
        assertInstanceOf(WarmPrefetches.Status.Unknown.class, warm.poll(ids[1]), "completed, never polled: dropped");
        assertEquals(0, warm.status().get("held_job_count"), "every job expired");
        assertEquals((long) WarmPrefetches.MAX_JOBS, warm.status().get("expired_job_count"));
        accepted(warm.submit("org/model", 1, TOKENS, ""));
    }
}
