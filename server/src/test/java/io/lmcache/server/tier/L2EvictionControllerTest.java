package io.lmcache.server.tier;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2AdapterSpec;
import io.lmcache.server.l2.L2AdapterSpecs;
import io.lmcache.server.l2.L2Adapters;
import io.lmcache.server.l2.L2Hash;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.l2.L2Lru;
import io.lmcache.server.metrics.L2Metrics;
import io.lmcache.server.metrics.ServerMetrics;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** fs_native with max_capacity_gb and an LRU eviction block: the least recently stored or loaded keys go, locked keys stay. */
class L2EvictionControllerTest {
    private static final long BYTES = 64 * 1024;

    @TempDir
    Path dir;

    @Test
    void atTheWatermarkTheLeastRecentlyUsedUnlockedKeysAreDeleted() throws Exception {
        // 0.0005 GiB = 512 KiB of capacity: 8 objects fill it
        L2AdapterSpec spec = L2AdapterSpecs.parse("{\"type\":\"fs_native\",\"base_path\":\"" + dir + "\",\"max_capacity_gb\":0.00048828125,"
                + "\"eviction\":{\"eviction_policy\":\"LRU\",\"trigger_watermark\":0.75,\"eviction_ratio\":0.25}}");
        ServerMetrics serverMetrics = new ServerMetrics();
        L2Metrics metrics = new L2Metrics(serverMetrics);
        try (Arena arena = Arena.ofShared(); L2Adapter adapter = L2Adapters.create(spec, Thread.ofPlatform().daemon().factory())) {
            L2Lru lru = new L2Lru();
            adapter.registerListener(lru);
            L2EvictionController controller = new L2EvictionController(List.of(new L2EvictionController.Target(0, adapter, lru,
                    spec.eviction())), metrics);
            for (int i = 0; i < 5; i++) {
                store(adapter, key(i), arena.allocate(BYTES));
            }
            assertEquals(0, controller.evict(new L2EvictionController.Target(0, adapter, lru, spec.eviction())), "5/8 is under 0.75");
            store(adapter, key(5), arena.allocate(BYTES));
            // key 0 is locked by a lookup; key 1 was loaded last, so it is the most recently used
            long lookup = adapter.submitLookupAndLock(List.of(key(0)), Map.of(0, BYTES));
            await().atMost(Duration.ofSeconds(5)).until(() -> adapter.queryLookupAndLock(lookup) != null);
            long load = adapter.submitLoad(List.of(key(1)), List.of(arena.allocate(BYTES)));
            await().atMost(Duration.ofSeconds(5)).until(() -> adapter.queryLoad(load) != null);
            int removed = controller.evict(new L2EvictionController.Target(0, adapter, lru, spec.eviction()));
            assertEquals(1, removed, "a quarter of 512 KiB is two objects' worth: key 0 (locked) is skipped, key 2 goes");
            assertEquals(1, metrics.evictedObjects.sum());
            assertTrue(serverMetrics.scrape().contains("lmcache_mp_l2_evicted_objects_chunks_total{cache_salt=\"\"} 1.0"), "LMCache's name");
            assertTrue(dir.resolve(name(0)).toFile().exists(), "the locked key stays");
            assertTrue(dir.resolve(name(1)).toFile().exists(), "the recently loaded key stays");
            assertFalse(dir.resolve(name(2)).toFile().exists(), "the least recently used unlocked key is gone");
            assertEquals(5 * BYTES, adapter.usage().totalBytesUsed());
        }
    }

    private static L2Key key(int i) {
        return L2Key.of("m", L2Key.packKvRank(1, 0), 0, new L2Hash(5, i, 0, 0), "");
    }

    private static String name(int i) {
        return "m@0x01000100@0@" + key(i).hashHex() + ".data";
    }

    @Test
    void aRestartCountsTheFilesOfEarlierRunsAndEvictsTheOldestFirst() throws Exception {
        // 512 KiB of capacity, as above; an earlier run left 6 objects: 6/8 is at the 0.75 watermark
        L2AdapterSpec spec = L2AdapterSpecs.parse("{\"type\":\"fs_native\",\"base_path\":\"" + dir + "\",\"max_capacity_gb\":0.00048828125,"
                + "\"eviction\":{\"eviction_policy\":\"LRU\",\"trigger_watermark\":0.75,\"eviction_ratio\":0.25}}");
        try (Arena arena = Arena.ofShared(); L2Adapter earlier = L2Adapters.create(spec, Thread.ofPlatform().daemon().factory())) {
            for (int i = 0; i < 6; i++) {
                store(earlier, key(i), arena.allocate(BYTES));
            }
        }
        long nowMs = System.currentTimeMillis();
        for (int i = 0; i < 6; i++) {
            // written in another order than their names': key 4 is the oldest, then 2, 0, 1, 3, 5
            long ageMin = new int[] {30, 20, 40, 10, 50, 5}[i];
            Files.setLastModifiedTime(dir.resolve(name(i)), FileTime.fromMillis(nowMs - TimeUnit.MINUTES.toMillis(ageMin)));
        }
        L2Metrics metrics = new L2Metrics(new ServerMetrics());
        try (L2Adapter adapter = L2Adapters.create(spec, Thread.ofPlatform().daemon().factory())) {
            L2Lru lru = new L2Lru();
            adapter.registerListener(lru);
            L2EvictionController.Target target = new L2EvictionController.Target(0, adapter, lru, spec.eviction());
            await().atMost(Duration.ofSeconds(10)).until(() -> adapter.usage().totalBytesUsed() == 6 * BYTES);
            assertEquals(2, new L2EvictionController(List.of(target), metrics).evict(target), "two objects' worth, the two oldest");
            assertFalse(Files.exists(dir.resolve(name(4))));
            assertFalse(Files.exists(dir.resolve(name(2))));
            for (int i : new int[] {0, 1, 3, 5}) {
                assertTrue(Files.exists(dir.resolve(name(i))), "key " + i + " is newer");
            }
            assertEquals(4 * BYTES, adapter.usage().totalBytesUsed());
        }
    }

    private static void store(L2Adapter adapter, L2Key key, MemorySegment object) {
        long task = adapter.submitStore(List.of(key), List.of(object));
        await().atMost(Duration.ofSeconds(5)).until(() -> adapter.popCompletedStores().containsKey(task));
    }
}
