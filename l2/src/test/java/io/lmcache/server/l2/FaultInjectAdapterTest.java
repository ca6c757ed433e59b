package io.lmcache.server.l2;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The decorator clears load bits only, by position in each load task's key list, and reports its settings in the inner status. */
class FaultInjectAdapterTest {
    @TempDir
    Path dir;

    /** Issue 45 N12: a spec naming two million gap indices made a 17.9 MB banner line; banner and status show 16 and the count. */
    @Test
    void millionsOfGapIndicesAreShownAsTheFirstFewAndTheirCount() {
        Set<Integer> many = new TreeSet<>();
        for (int i = 0; i < 2_000_000; i++) {
            many.add(i);
        }
        String banner = FaultInjectIo.shown(many);
        assertEquals("[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, ...(2000000 items)]", banner);
        assertEquals("[1, 2]", FaultInjectIo.shown(List.of(1, 2)), "a short list as before");
        assertEquals(FaultInjectIo.SHOWN_ITEMS, FaultInjectIo.first(many).size());
    }

    @Test
    void dropsByPositionOfEachLoadTaskAndDelegatesTheRest() throws Exception {
        L2AdapterSpec spec = L2AdapterSpecs.parse("{\"type\":\"fault_inject\",\"gap_tail_ratios\":[0.5],\"gap_indices\":[0],"
                + "\"inner\":{\"type\":\"fs_native\",\"base_path\":\"" + dir + "\"}}");
        try (Arena arena = Arena.ofShared(); L2Adapter adapter = L2Adapters.create(spec, Thread.ofPlatform().daemon().factory())) {
            List<L2Key> keys = new ArrayList<>();
            List<MemorySegment> objects = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                keys.add(L2Key.of("m", 0, 0, new L2Hash(9, i, 0, 0), ""));
                objects.add(arena.allocate(4096));
            }
            long store = adapter.submitStore(keys, objects);
            await().atMost(Duration.ofSeconds(10)).until(() -> adapter.popCompletedStores().containsKey(store));
            long lookup = adapter.submitLookupAndLock(keys, Map.of(0, 4096L));
            Bitmap[] found = new Bitmap[1];
            await().atMost(Duration.ofSeconds(10)).until(() -> (found[0] = adapter.queryLookupAndLock(lookup)) != null);
            assertEquals("11111", found[0].toString(), "lookups are never faulted");
            assertEquals("01011", load(adapter, keys, objects).toString(), "positions 0 (gap index) and round(0.5 * 4) = 2 dropped");
            assertEquals("0", load(adapter, keys.subList(3, 4), objects.subList(3, 4)).toString(), "positions count in each task's own list");
            Map<String, Object> status = adapter.status();
            assertEquals("FSNativeL2Adapter", status.get("type"));
            assertEquals(Map.of("rate", 0.0, "seed", 0L, "gap_indices", List.of(0), "gap_indices_count", 1, "gap_tail_ratios", List.of(0.5),
                    "gap_tail_ratios_count", 1), status.get("fault_inject"));
        }
    }

    private static Bitmap load(L2Adapter adapter, List<L2Key> keys, List<MemorySegment> buffers) {
        long task = adapter.submitLoad(keys, buffers);
        Bitmap[] loaded = new Bitmap[1];
        await().atMost(Duration.ofSeconds(10)).until(() -> (loaded[0] = adapter.queryLoad(task)) != null);
        assertNull(adapter.queryLoad(task));
        return loaded[0];
    }
}
