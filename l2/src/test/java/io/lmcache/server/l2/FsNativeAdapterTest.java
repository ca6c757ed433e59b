package io.lmcache.server.l2;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.UserDefinedFileAttributeView;
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

    private L2Adapter adapter(String extraJson) throws Exception {
        L2AdapterSpec spec = L2AdapterSpecs.parse("{\"type\":\"fs_native\",\"base_path\":\"" + dir + "\"" + extraJson + "}");
        L2Adapter adapter = L2Adapters.create(spec, Thread.ofPlatform().daemon().name("test-fs-", 0).factory());
        adapters.add(adapter);
        return adapter;
    }

    /** The adapter's files, for their test hooks. */
    private static FsNativeFiles files(L2Adapter adapter) {
        return ((FsNativeIo) ((AsyncL2Adapter) adapter).io()).files();
    }

    /** An object format as the server records it beside the bytes (L2Key#layout). */
    private static final String LAYOUT = "v1 torch.bfloat16[2,4,16,2x64];";

    /** Rank 3 of a world of 4. */
    private static L2Key key(int i) {
        return L2Key.of("org/model", L2Key.packKvRank(4, 3), 0, new L2Hash(0x1111L * i, 0x2222L + i, 0, 0), "");
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
        L2Adapter first = adapter("");
        List<MemorySegment> objects = List.of(filled(1), filled(2));
        StoreResult stored = store(first, List.of(key(1), key(2)), objects);
        assertEquals(new StoreResult(true, 2L * BYTES), stored);
        assertEquals(new StoreResult(true, 0), store(first, List.of(key(1)), List.of(objects.getFirst())), "a re-store writes nothing");
        assertEquals(2L * BYTES, first.usage().totalBytesUsed());
        assertTrue(Files.isRegularFile(dir.resolve("org-SEP-model@0x04030403@0@" + key(1).hashHex() + ".data")),
                "LMCache's file name: packed kv rank (world 4, rank 3, local world 4, local rank 3), object group, hash");
        first.close();
        adapters.clear();

        L2Adapter second = adapter("");
        await().atMost(Duration.ofSeconds(10)).until(() -> second.usage().totalBytesUsed() == 2L * BYTES);
        Bitmap found = lookup(second, List.of(key(1), key(7), key(2)));
        assertEquals("101", found.toString());
        List<MemorySegment> buffers = List.of(arena.allocate(BYTES), arena.allocate(BYTES));
        assertEquals("11", load(second, List.of(key(1), key(2)), buffers).toString());
        assertArrayEquals(bytes(objects.get(0)), bytes(buffers.get(0)));
        assertArrayEquals(bytes(objects.get(1)), bytes(buffers.get(1)));
        assertEquals(2L * BYTES, second.usage().totalBytesUsed(), "a key found at start and loaded since counts once");
        second.submitUnlock(List.of(key(1), key(2)));
    }

    @Test
    void theKvRankIsLmcachesPackedOne() {
        assertEquals(0x01000100, L2Key.packKvRank(1, 0), "LMCache's single-GPU kv_rank (its docs' Qwen3-8B example file)");
        assertEquals(0x02010201, L2Key.packKvRank(2, 1));
        L2Key parsed = FsNativeFiles.parse(FsNativeFiles.fileName(L2Key.of("a/b/c", 7, 2, new L2Hash(1, 2, 3, 4), "x-y")));
        assertEquals(L2Key.of("a/b/c", 7, 2, new L2Hash(1, 2, 3, 4), "x-y"), parsed, "a file name gives its key back");
        L2Key foreign = new L2Key("m", 7, 2, new L2Hash(1, 2, 3, 4), "", 0x0300_1003, LAYOUT);
        assertEquals(foreign, FsNativeFiles.parse(FsNativeFiles.fileName(foreign)), "a foreign layout's name gives its key back");
        assertNull(FsNativeFiles.parse("org-SEP-model@0x00000003@0@f3000001@0123456789abcdef0123456789abcdef.data"),
                "an older version's name (format field, 128-bit hash) is no key");
        assertNull(FsNativeFiles.parse("m@0x00000003@0@f0@" + key(1).hashHex() + ".data"), "tag 0 is never written");
    }

    /**
     * LMCache's names, worked from keys.h's {@code key_to_filename} and native_connector_l2_adapter.py's
     * {@code _object_key_to_string} by hand: model with "/" as "-SEP-", "0x" and the kv rank in 8 hex digits, the object group in
     * hex without padding, the 64 hex digits of the hash, "@salt" only when there is one.
     */
    @Test
    void namesAreLmcachesForKnownKeys() {
        L2Hash hash = new L2Hash(0x0123456789abcdefL, 0xfedcba9876543210L, 0x00000000000000ffL, 0xa0b0c0d0e0f00010L);
        String hex = "0123456789abcdeffedcba987654321000000000000000ffa0b0c0d0e0f00010";
        assertEquals(hex, hash.hex());
        assertEquals(hash, L2Hash.parse(hex));
        L2Key plain = L2Key.of("Qwen/Qwen3-8B", L2Key.packKvRank(1, 0), 0, hash, "");
        assertEquals("Qwen/Qwen3-8B@01000100@0@" + hex, plain.wireKey());
        assertEquals("Qwen-SEP-Qwen3-8B@0x01000100@0@" + hex + ".data", FsNativeFiles.fileName(plain));
        L2Key salted = L2Key.of("org/sub/model", L2Key.packKvRank(4, 3), 0x1a, hash, "tenant-a");
        assertEquals("org/sub/model@04030403@1a@" + hex + "@tenant-a", salted.wireKey());
        assertEquals("org-SEP-sub-SEP-model@0x04030403@1a@" + hex + "@tenant-a.data", FsNativeFiles.fileName(salted));
        L2Key wide = L2Key.of("m", L2Key.packKvRank(200, 199), 0, hash, "");
        assertEquals("m@0x" + "c8c7c8c7" + "@0@" + hex + ".data", FsNativeFiles.fileName(wide), "a packed rank above 2^31 is unsigned");
        assertEquals("m@01000100@0@f3001003@" + hex, new L2Key("m", 0x01000100, 0, hash, "", 0x0300_1003, "").wireKey(),
                "a layout LMCache never writes is named apart");
        assertNull(FsNativeFiles.fileName(L2Key.of("m", 1, 0, hash, "a/b")), "a salt LMCache refuses is no file name");
        assertNull(FsNativeFiles.fileName(L2Key.of("m@x", 1, 0, hash, "")), "a model LMCache refuses is no file name");
        assertEquals(plain, new L2Key("Qwen/Qwen3-8B", 0x01000100, 0, hash, "", 0, LAYOUT), "the recorded format is no part of the key");
    }

    @Test
    void anotherWorldSizeOrLayoutTagIsAnotherFileNeverLoaded() throws Exception {
        L2Adapter adapter = adapter("");
        L2Key tp1 = L2Key.of("org/model", L2Key.packKvRank(1, 0), 0, new L2Hash(5, 6, 0, 0), "");
        assertTrue(store(adapter, List.of(tp1), List.of(filled(11))).ok());
        L2Key tp2 = L2Key.of("org/model", L2Key.packKvRank(2, 0), 0, new L2Hash(5, 6, 0, 0), "");
        L2Key otherLayout = new L2Key("org/model", L2Key.packKvRank(1, 0), 0, new L2Hash(5, 6, 0, 0), "", 0x0300_1003, "");
        assertEquals("100", lookup(adapter, List.of(tp1, tp2, otherLayout)).toString(), "same model, hash and size: only the writer's key");
        adapter.submitUnlock(List.of(tp1));
        List<MemorySegment> buffers = List.of(arena.allocate(BYTES), arena.allocate(BYTES));
        assertEquals("00", load(adapter, List.of(tp2, otherLayout), buffers).toString());
    }

    /** Issue 45 N13: a format attribute that is there but names no format is a counted miss, never taken for an absent one. */
    @Test
    void aJunkFormatAttributeIsACountedMissNotAnAbsentOne() throws Exception {
        L2Adapter adapter = adapter("");
        L2Key mine = new L2Key("org/model", L2Key.packKvRank(1, 0), 0, new L2Hash(3, 1, 4, 1), "", 0, LAYOUT);
        assertTrue(store(adapter, List.of(mine), List.of(filled(31))).ok());
        Path file = dir.resolve(FsNativeFiles.fileName(mine));
        assumeTrue(FsNativeFiles.recordedFormat(file) != null, "the file system keeps user attributes");
        var view = Files.getFileAttributeView(file, UserDefinedFileAttributeView.class);
        MemorySegment buffer = arena.allocate(BYTES);
        byte[][] junk = {new byte[FsNativeFiles.MAX_FORMAT_BYTES + 1], {(byte) 0xff, (byte) 0xfe, 'x'}, {}, "v1\nforged".getBytes()};
        long counted = 0;
        for (byte[] value : junk) {
            view.write(FsNativeFiles.FORMAT_XATTR, ByteBuffer.wrap(value));
            assertTrue(FsNativeFiles.recordedFormat(file) == FsNativeFiles.INVALID_FORMAT, "junk of " + value.length + " bytes");
            assertEquals("0", lookup(adapter, List.of(mine)).toString(), "a lookup refuses it");
            assertEquals("0", load(adapter, List.of(mine), List.of(buffer)).toString(), "a load refuses it");
            counted += 2;
            assertEquals(counted, adapter.eventCounts().get("format_xattr_invalid"));
        }
        assertEquals(0L, adapter.eventCounts().get("format_mismatch_layout"));
        view.write(FsNativeFiles.FORMAT_XATTR, ByteBuffer.wrap(LAYOUT.getBytes(StandardCharsets.UTF_8)));
        assertEquals("1", load(adapter, List.of(mine), List.of(buffer)).toString(), "its own format again: read");
        view.delete(FsNativeFiles.FORMAT_XATTR);
        assertNull(FsNativeFiles.recordedFormat(file), "no attribute at all is absent");
    }

    @Test
    void aFileOfAnotherSizeOrRecordedFormatIsACountedMissAndAFileWithoutOneIsServed() throws Exception {
        L2Adapter adapter = adapter("");
        L2Key mine = new L2Key("org/model", L2Key.packKvRank(1, 0), 0, new L2Hash(7, 8, 9, 10), "", 0, LAYOUT);
        assertTrue(store(adapter, List.of(mine), List.of(filled(21))).ok());
        Path file = dir.resolve(FsNativeFiles.fileName(mine));
        boolean xattrs = FsNativeFiles.recordedFormat(file) != null;
        L2Key otherHeads = new L2Key("org/model", L2Key.packKvRank(1, 0), 0, new L2Hash(7, 8, 9, 10), "", 0, "v1 torch.bfloat16[2,4,16,4x32];");
        MemorySegment buffer = arena.allocate(BYTES);
        if (xattrs) {
            assertEquals(LAYOUT, FsNativeFiles.recordedFormat(file), "the format goes into user." + FsNativeFiles.FORMAT_XATTR);
            assertEquals("0", lookup(adapter, List.of(otherHeads)).toString(), "4 heads x 32 do not read 2 heads x 64");
            assertEquals("0", load(adapter, List.of(otherHeads), List.of(buffer)).toString());
            assertEquals(2L, adapter.eventCounts().get("format_mismatch_layout"));
            assertEquals(0L, adapter.eventCounts().get("format_xattr_unsupported"));
        } else {
            assertEquals(1L, adapter.eventCounts().get("format_xattr_unsupported"), "a file system without attributes, counted once");
        }
        assertEquals("1", load(adapter, List.of(mine), List.of(buffer)).toString(), "its own format reads it");
        assertArrayEquals(bytes(filled(21)), bytes(buffer));
        // LMCache's files have no attribute: taken by their size
        L2Key lmcache = L2Key.of("org/model", L2Key.packKvRank(1, 0), 0, new L2Hash(1, 1, 1, 1), "");
        Files.write(dir.resolve(FsNativeFiles.fileName(lmcache)), bytes(filled(22)));
        L2Key asReader = new L2Key("org/model", L2Key.packKvRank(1, 0), 0, new L2Hash(1, 1, 1, 1), "", 0, LAYOUT);
        assertEquals("1", lookup(adapter, List.of(asReader)).toString());
        adapter.submitUnlock(List.of(asReader));
        assertEquals("1", load(adapter, List.of(asReader), List.of(buffer)).toString());
        assertArrayEquals(bytes(filled(22)), bytes(buffer));
        // a file of another size: a miss at lookup and load, counted, kept
        L2Key bigger = L2Key.of("org/model", L2Key.packKvRank(1, 0), 0, new L2Hash(2, 2, 2, 2), "");
        Files.write(dir.resolve(FsNativeFiles.fileName(bigger)), new byte[2 * BYTES]);
        assertEquals("0", lookup(adapter, List.of(bigger)).toString());
        assertEquals("0", load(adapter, List.of(bigger), List.of(buffer)).toString());
        assertEquals(2L, adapter.eventCounts().get("format_mismatch_size"));
        assertTrue(Files.isRegularFile(dir.resolve(FsNativeFiles.fileName(bigger))), "a file of another layout is left alone");
    }

    @Test
    void aReadGoesByTheSizeOfTheFileItOpenedNotOfTheNameBefore() throws Exception {
        L2Adapter adapter = adapter("");
        assertTrue(store(adapter, List.of(key(1)), List.of(filled(12))).ok());
        Path file = dir.resolve(FsNativeFiles.fileName(key(1)));
        Path bigger = dir.resolve("bigger.bin");
        Files.write(bigger, new byte[2 * BYTES]);
        // a writer of another layout renames its (bigger) object over the name between the check and the open
        files(adapter).beforeOpen = () -> {
            try {
                Files.move(bigger, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        };
        MemorySegment buffer = filled(13);
        assertEquals("0", load(adapter, List.of(key(1)), List.of(buffer)).toString(), "the file opened is not the object's size: a miss");
        assertArrayEquals(bytes(filled(13)), bytes(buffer), "and nothing of it was read into the buffer");
        assertEquals(2L * BYTES, Files.size(file), "a file of another size is left alone");
    }

    @Test
    void lookupsAndLoadsNeverWaitBehindTheWriteBacklog() throws Exception {
        L2Adapter adapter = adapter(",\"num_workers\":1");
        MemorySegment object = filled(14);
        assertTrue(store(adapter, List.of(key(1)), List.of(object)).ok());
        CountDownLatch disk = new CountDownLatch(1);
        files(adapter).beforeWrite = () -> {
            try {
                disk.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        };
        List<Long> backlog = new ArrayList<>();
        for (int i = 2; i < 10; i++) {
            backlog.add(adapter.submitStore(List.of(key(i)), List.of(object))); // the one writer is stuck on the first
        }
        assertEquals("1", lookup(adapter, List.of(key(1))).toString(), "answered while every write waits");
        MemorySegment buffer = arena.allocate(BYTES);
        assertEquals("1", load(adapter, List.of(key(1)), List.of(buffer)).toString());
        assertArrayEquals(bytes(object), bytes(buffer));
        adapter.submitUnlock(List.of(key(1)));
        assertTrue(adapter.popCompletedStores().isEmpty(), "the writes are still waiting");
        disk.countDown();
        List<Long> done = new ArrayList<>();
        await().atMost(Duration.ofSeconds(10)).until(() -> {
            done.addAll(adapter.popCompletedStores().keySet());
            return done.containsAll(backlog);
        });
        assertEquals(1, adapter.status().get("read_workers"), "read_io_depth unset: as many readers as num_workers, in a pool of their own");
    }

    @Test
    void filesOfEarlierRunsAreCountedOldestFirstAndEvictable() throws Exception {
        L2Adapter first = adapter("");
        store(first, List.of(key(1), key(2), key(3)), List.of(filled(1), filled(2), filled(3)));
        first.close();
        adapters.clear();
        long nowMs = System.currentTimeMillis();
        for (int i = 1; i <= 3; i++) {
            // key 3 is the oldest, key 1 the newest
            Files.setLastModifiedTime(dir.resolve(FsNativeFiles.fileName(key(i))), FileTime.fromMillis(nowMs - 3_600_000L * i));
        }
        Files.write(dir.resolve("not-ours.data"), new byte[100]);
        Path outside = Files.createTempFile("outside", ".data");
        Files.write(outside, new byte[BYTES]);
        Files.createSymbolicLink(dir.resolve(FsNativeFiles.fileName(key(9))), outside);

        L2Adapter second = adapter(",\"max_capacity_gb\":1");
        L2Lru early = new L2Lru();
        second.registerListener(early);
        assertTrue(store(second, List.of(key(4)), List.of(filled(4))).ok());
        await().atMost(Duration.ofSeconds(10)).until(() -> "done".equals(((Map<?, ?>) second.status().get("startup_scan")).get("state")));
        assertEquals(4L * BYTES, second.usage().totalBytesUsed(), "the three files found (the link not followed) and the new one");
        Map<?, ?> scan = (Map<?, ?>) second.status().get("startup_scan");
        assertEquals(3, scan.get("files"));
        assertEquals(1, scan.get("unrecognized_files"), "not-ours.data");
        L2Lru late = new L2Lru();
        second.registerListener(late);
        for (L2Lru lru : List.of(early, late)) {
            assertEquals(List.of(key(3), key(2), key(1), key(4)), lru.victims(4L * BYTES), "found files first, oldest first, then this run's");
        }
        assertEquals(List.of(key(3)), second.delete(late.victims(1)));
        assertFalse(Files.exists(dir.resolve(FsNativeFiles.fileName(key(3)))), "an earlier run's file is evicted");
        assertEquals(3L * BYTES, second.usage().totalBytesUsed());
        Files.delete(dir.resolve(FsNativeFiles.fileName(key(2))));
        assertEquals(List.of(), second.delete(List.of(key(2))), "removed by hand: nothing to remove");
        assertEquals(2L * BYTES, second.usage().totalBytesUsed(), "but no longer counted, nor chosen again");
        assertEquals(List.of(key(1)), late.victims(1));
        assertTrue(Files.exists(outside), "the link's target is never touched");
        Files.delete(outside);
    }

    @Test
    void aShortFileIsAMissAndIsRemoved() throws Exception {
        L2Adapter adapter = adapter("");
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
        L2Adapter adapter = adapter(",\"num_workers\":4");
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
        L2Adapter adapter = adapter("");
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
        L2Adapter adapter = adapter(",\"persist_enabled\":false,\"max_capacity_gb\":1");
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
        L2Adapter adapter = adapter(",\"use_odirect\":true");
        MemorySegment object = filled(9);
        assertTrue(store(adapter, List.of(key(1)), List.of(object)).ok());
        MemorySegment buffer = arena.allocate(BYTES, 4096);
        assertEquals("1", load(adapter, List.of(key(1)), List.of(buffer)).toString());
        assertArrayEquals(bytes(object), bytes(buffer));
        if (!Files.getFileStore(dir).type().equals("tmpfs")) {
            assertEquals(0L, adapter.status().get("odirect_fallbacks"), "aligned 64 KiB objects go through O_DIRECT on " + Files.getFileStore(dir).type());
        }
    }

    /**
     * The listing pages in name order through the LMCache-named files only (no link, no stranger's name, no block-order fallback
     * object), each once even when a file arrives mid-listing, with its size; a model filter; a cursor it never gave is refused.
     */
    @Test
    void listingPagesThroughTheObjectFilesOnceInNameOrderFollowingNoLink() throws Exception {
        L2Adapter adapter = adapter("");
        List<L2Key> keys = new ArrayList<>();
        for (int i = 1; i <= 5; i++) {
            keys.add(i == 5 ? L2Key.of("org/model", L2Key.packKvRank(4, 3), 0, new L2Hash(5, 5, 0, 0), "tenant-a") : key(i));
            Files.write(dir.resolve(FsNativeFiles.fileName(keys.getLast())), new byte[100 + i]);
        }
        L2Key other = L2Key.of("other", L2Key.packKvRank(1, 0), 0, new L2Hash(9, 9, 0, 0), "");
        Files.write(dir.resolve(FsNativeFiles.fileName(other)), new byte[7]);
        L2Key foreign = new L2Key("org/model", L2Key.packKvRank(4, 3), 0, new L2Hash(8, 8, 0, 0), "", 3, "");
        Files.write(dir.resolve(FsNativeFiles.fileName(foreign)), new byte[7]);
        Files.write(dir.resolve("stranger.data"), new byte[7]);
        Path target = Files.write(dir.resolve("elsewhere.bin"), new byte[7]);
        Files.createSymbolicLink(dir.resolve(FsNativeFiles.fileName(L2Key.of("org/model", L2Key.packKvRank(4, 3), 0,
                new L2Hash(7, 7, 0, 0), ""))), target);

        List<L2Key> listed = new ArrayList<>();
        String cursor = null;
        int pages = 0;
        do {
            KeyPage page = adapter.listKeys("org/model", 2, cursor);
            for (KeyPage.Entry entry : page.entries()) {
                listed.add(entry.key());
                assertEquals(100 + keys.indexOf(entry.key()) + 1, entry.sizeBytes(), entry.toString());
            }
            if (pages == 0) { // a file arriving mid-listing is listed once or (sorted before the cursor) not at all
                Files.write(dir.resolve(FsNativeFiles.fileName(key(6))), new byte[106]);
                keys.add(key(6));
            }
            cursor = page.nextCursor();
            pages++;
        } while (cursor != null && pages < 10);
        assertEquals(listed.size(), listed.stream().distinct().count(), "each once: " + listed);
        assertTrue(listed.containsAll(keys.subList(0, 5)), "every object present throughout: " + listed);
        assertTrue(listed.stream().allMatch(keys::contains), "no link, stranger, foreign layout or other model: " + listed);
        assertEquals(List.of("tenant-a"), listed.stream().map(L2Key::salt).filter(salt -> !salt.isEmpty()).toList());
        assertEquals(List.of(other), adapter.listKeys("other", 10, null).entries().stream().map(KeyPage.Entry::key).toList());
        assertNull(adapter.listKeys(null, 10, null).nextCursor(), "everything fits one page of 10");
        assertEquals(7, adapter.listKeys(null, 10, null).entries().size(), "six of org/model and one of other");
        for (String bad : List.of("%%%", "bm90LWEtbmFtZQ")) {
            try {
                adapter.listKeys(null, 10, bad);
                throw new AssertionError("a cursor the adapter never gave: " + bad);
            } catch (IllegalArgumentException expected) {
                // LMCache's ValueError: the route's 400
            }
        }
    }
}
