package io.lmcache.server.l2;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class FsNativeAdapterTest {
    private static final int BYTES = 64 * 1024;
    @TempDir
    Path dir;
    private final Arena arena = Arena.ofShared();
    private final List<L2Adapter> adapters = new ArrayList<>();

    @AfterEach
    void close() {
        adapters.forEach(L2Adapter::close);
        arena.close();
    }

    private FsNativeAdapter adapter(String extraJson) throws Exception {
        L2AdapterSpec spec = L2AdapterSpecs.parse("{\"type\":\"fs_native\",\"base_path\":\"" + dir + "\"" + extraJson + "}");
        FsNativeAdapter adapter = (FsNativeAdapter) L2Adapters.create(spec, Thread.ofPlatform().daemon().name("test-fs-", 0).factory());
        adapters.add(adapter);
        return adapter;
    }

    private static L2Key key(int i) {
        return new L2Key("org/model", 3, 0, 0x1111L * i, 0x2222L + i, "");
    }

    private MemorySegment filled(long seed) {
        MemorySegment segment = arena.allocate(BYTES, 4096);
        byte[] bytes = new byte[BYTES];
        new Random(seed).nextBytes(bytes);
        MemorySegment.copy(bytes, 0, segment, ValueLayout.JAVA_BYTE, 0, BYTES);
        return segment;
    }

    private static StoreResult store(L2Adapter adapter, List<L2Key> keys, List<MemorySegment> objects) {
        long task = adapter.submitStore(keys, objects);
        StoreResult[] result = new StoreResult[1];
        await().atMost(Duration.ofSeconds(10)).until(() -> {
            result[0] = adapter.popCompletedStores().get(task);
            return result[0] != null;
        });
        return result[0];
    }

    private static Bitmap lookup(L2Adapter adapter, List<L2Key> keys) {
        long task = adapter.submitLookupAndLock(keys, Map.of(0, (long) BYTES));
        Bitmap[] found = new Bitmap[1];
        await().atMost(Duration.ofSeconds(10)).until(() -> (found[0] = adapter.queryLookupAndLock(task)) != null);
        assertNull(adapter.queryLookupAndLock(task), "a result is handed out once");
        return found[0];
    }

    private static Bitmap load(L2Adapter adapter, List<L2Key> keys, List<MemorySegment> buffers) {
        long task = adapter.submitLoad(keys, buffers);
        Bitmap[] loaded = new Bitmap[1];
        await().atMost(Duration.ofSeconds(10)).until(() -> (loaded[0] = adapter.queryLoad(task)) != null);
        assertNull(adapter.queryLoad(task), "a result is handed out once");
        return loaded[0];
    }

    private static byte[] bytes(MemorySegment segment) {
        return segment.toArray(ValueLayout.JAVA_BYTE);
    }

    @Test
    void storesLooksUpAndLoadsAndFindsFilesAgainAfterARestart() throws Exception {
        FsNativeAdapter first = adapter("");
        List<MemorySegment> objects = List.of(filled(1), filled(2));
        StoreResult stored = store(first, List.of(key(1), key(2)), objects);
        assertEquals(new StoreResult(true, 2L * BYTES), stored);
        assertEquals(new StoreResult(true, 0), store(first, List.of(key(1)), List.of(objects.getFirst())), "a re-store writes nothing");
        assertEquals(2L * BYTES, first.usage().totalBytesUsed());
        assertTrue(Files.isRegularFile(dir.resolve("org-SEP-model@0x00000003@0@" + key(1).hashHex() + ".data")), "the settled file name");
        first.close();
        adapters.clear();

        FsNativeAdapter second = adapter("");
        assertEquals(0, second.usage().totalBytesUsed(), "accounting starts at 0 in a new process");
        Bitmap found = lookup(second, List.of(key(1), key(7), key(2)));
        assertEquals("101", found.toString());
        List<MemorySegment> buffers = List.of(arena.allocate(BYTES), arena.allocate(BYTES));
        assertEquals("11", load(second, List.of(key(1), key(2)), buffers).toString());
        assertArrayEquals(bytes(objects.get(0)), bytes(buffers.get(0)));
        assertArrayEquals(bytes(objects.get(1)), bytes(buffers.get(1)));
        assertEquals(2L * BYTES, second.usage().totalBytesUsed(), "a key loaded in this process is counted");
        second.submitUnlock(List.of(key(1), key(2)));
    }

    @Test
    void aShortFileIsAMissAndIsRemoved() throws Exception {
        FsNativeAdapter adapter = adapter("");
        store(adapter, List.of(key(1), key(2)), List.of(filled(3), filled(4)));
        Path one = dir.resolve(FsNativeFiles.fileName(key(1)));
        Path two = dir.resolve(FsNativeFiles.fileName(key(2)));
        truncate(one, BYTES - 1);
        truncate(two, BYTES / 2);
        assertEquals("00", lookup(adapter, List.of(key(2), key(3))).toString(), "a short file is not found");
        assertFalse(Files.exists(two), "the short file found at lookup is removed");
        MemorySegment buffer = arena.allocate(BYTES);
        assertEquals("0", load(adapter, List.of(key(1)), List.of(buffer)).toString(), "a short file found at load is a miss");
        assertFalse(Files.exists(one), "and is removed");
        assertEquals(2L, adapter.status().get("short_files_removed"));
    }

    private static void truncate(Path file, long bytes) throws IOException {
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.WRITE)) {
            channel.truncate(bytes);
        }
    }

    @Test
    void twoConcurrentStoresOfOneKeyNeverLeaveAShortFile() throws Exception {
        FsNativeAdapter adapter = adapter(",\"num_workers\":4");
        MemorySegment object = filled(5);
        Path file = dir.resolve(FsNativeFiles.fileName(key(1)));
        AtomicBoolean stop = new AtomicBoolean();
        AtomicInteger shortSeen = new AtomicInteger();
        AtomicInteger checks = new AtomicInteger();
        Thread watcher = Thread.ofPlatform().start(() -> {
            while (!stop.get()) {
                try {
                    if (Files.exists(file)) {
                        byte[] seen = Files.readAllBytes(file);
                        checks.incrementAndGet();
                        if (seen.length != BYTES) {
                            shortSeen.incrementAndGet();
                        }
                    }
                } catch (IOException e) {
                    // renamed away between the exists and the read: not a short file
                }
            }
        });
        for (int round = 0; round < 200; round++) {
            Files.deleteIfExists(file);
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> writers = new ArrayList<>();
            List<Long> tasks = new CopyOnWriteArrayList<>();
            for (int w = 0; w < 2; w++) {
                writers.add(Thread.ofPlatform().start(() -> {
                    try {
                        start.await();
                    } catch (InterruptedException e) {
                        return;
                    }
                    tasks.add(adapter.submitStore(List.of(key(1)), List.of(object)));
                }));
            }
            start.countDown();
            for (Thread writer : writers) {
                writer.join();
            }
            int[] done = {0};
            await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(1)).until(() -> {
                for (StoreResult result : adapter.popCompletedStores().values()) {
                    assertTrue(result.ok());
                    done[0]++;
                }
                return done[0] == 2;
            });
            assertEquals(BYTES, Files.size(file), "round " + round);
        }
        stop.set(true);
        watcher.join();
        assertEquals(0, shortSeen.get(), "a reader never saw a partial file (" + checks.get() + " reads)");
        try (Stream<Path> left = Files.list(dir)) {
            assertEquals(List.of(file), left.toList(), "no temporary file is left behind");
        }
    }

    @Test
    void aSymbolicLinkIsNeverFollowed() throws Exception {
        FsNativeAdapter adapter = adapter("");
        Path outside = Files.createTempFile("outside", ".bin");
        Files.write(outside, new byte[BYTES]);
        Path link = dir.resolve(FsNativeFiles.fileName(key(1)));
        Files.createSymbolicLink(link, outside);
        assertEquals("0", lookup(adapter, List.of(key(1))).toString(), "a link is not a stored object");
        assertEquals("0", load(adapter, List.of(key(1)), List.of(arena.allocate(BYTES))).toString());
        MemorySegment object = filled(6);
        assertTrue(store(adapter, List.of(key(1)), List.of(object)).ok());
        assertFalse(Files.isSymbolicLink(link), "the rename replaced the link itself");
        assertArrayEquals(new byte[BYTES], Files.readAllBytes(outside), "the link's target was never written");
        Files.delete(outside);
    }

    @Test
    void deleteSkipsLockedKeysAndPersistFalseRemovesWhatThisProcessWrote() throws Exception {
        FsNativeAdapter adapter = adapter(",\"persist_enabled\":false,\"max_capacity_gb\":1");
        store(adapter, List.of(key(1), key(2)), List.of(filled(7), filled(8)));
        assertEquals("11", lookup(adapter, List.of(key(1), key(2))).toString());
        adapter.submitUnlock(List.of(key(2)));
        assertEquals(List.of(key(2)), adapter.delete(List.of(key(1), key(2))), "the locked key stays");
        assertEquals((long) BYTES, adapter.usage().totalBytesUsed());
        assertEquals((double) BYTES / (1L << 30), adapter.usage().usageFraction(), 1e-12);
        adapter.close();
        adapters.clear();
        try (Stream<Path> left = Files.list(dir)) {
            assertEquals(0, left.count(), "persist_enabled false: nothing is kept at shutdown");
        }
    }

    @Test
    void oDirectReadsAndWritesTheSameBytes() throws Exception {
        FsNativeAdapter adapter = adapter(",\"use_odirect\":true");
        MemorySegment object = filled(9);
        assertTrue(store(adapter, List.of(key(1)), List.of(object)).ok());
        MemorySegment buffer = arena.allocate(BYTES, 4096);
        assertEquals("1", load(adapter, List.of(key(1)), List.of(buffer)).toString());
        assertArrayEquals(bytes(object), bytes(buffer));
        if (!Files.getFileStore(dir).type().equals("tmpfs")) {
            assertEquals(0L, adapter.status().get("odirect_fallbacks"), "aligned 64 KiB objects go through O_DIRECT on " + Files.getFileStore(dir).type());
        }
    }
}
