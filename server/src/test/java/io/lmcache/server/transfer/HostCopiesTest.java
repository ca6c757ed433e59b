package io.lmcache.server.transfer;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.cuda.HeadTranspose;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The CPU workers' copy threads: a copy spread over several threads lands exactly the bytes one thread's copy does, with
 * plain pieces cut at the runs' borders and head-major pieces whole; several transfer threads share the copy threads; the
 * threads are named, bounded and joined at close, after which copies still run (on the transfer thread); a copy whose helpers
 * are busy elsewhere lands on its transfer thread alone; a segment truncated under a copy fails that copy, not the threads.
 */
class HostCopiesTest {
    private static final int TENSORS = 4;
    private static final long TENSOR_BYTES = 2L << 20;
    private static final long POOL_BYTES = 4 * TENSOR_BYTES;
    /** Runs of 512 KiB: a copy of ~8 MiB is cut into ~15, several for each of the test's threads. */
    private static final long RUN_BYTES = 512L << 10;

    /** Random pieces covering the tensors (lengths 4 KiB .. 388 KiB, unaligned ones too), some of them head-major. */
    private static HostPieces pieces(long seed, boolean withTransposed) {
        Random random = new Random(seed);
        HostPieces pieces = new HostPieces();
        long objectOffset = 0;
        for (int tensor = 0; tensor < TENSORS; tensor++) {
            long offset = 0;
            while (true) {
                if (withTransposed && random.nextInt(4) == 0) {
                    long rowBytes = 256;
                    long length = 8 * 16 * rowBytes; // 8 heads x 16 rows of a block
                    if (offset + length > TENSOR_BYTES) {
                        break;
                    }
                    pieces.transposed(tensor, offset, objectOffset, length, HeadTranspose.shape(8, 16, 0, rowBytes));
                    offset += length;
                    objectOffset += length;
                    continue;
                }
                long length = 4096 + random.nextInt(3 << 17) + (random.nextBoolean() ? 0 : random.nextInt(64));
                if (offset + length > TENSOR_BYTES) {
                    break;
                }
                pieces.piece(tensor, offset, objectOffset, length);
                offset += length + random.nextInt(2) * 4096; // gaps between some pieces
                objectOffset += length;
            }
        }
        assertTrue(objectOffset <= POOL_BYTES);
        return pieces;
    }

    private static MemorySegment[] randomTensors(Arena arena, long seed) {
        Random random = new Random(seed);
        MemorySegment[] tensors = new MemorySegment[TENSORS];
        byte[] bytes = new byte[(int) TENSOR_BYTES];
        for (int i = 0; i < TENSORS; i++) {
            random.nextBytes(bytes);
            tensors[i] = arena.allocate(TENSOR_BYTES, 4096);
            MemorySegment.copy(bytes, 0, tensors[i], ValueLayout.JAVA_BYTE, 0, bytes.length);
        }
        return tensors;
    }

    private static byte[] bytes(MemorySegment segment) {
        return segment.toArray(ValueLayout.JAVA_BYTE);
    }

    /** The pool after {@code copies} stores the pieces, and the tensors after it retrieves them back into zeroed tensors. */
    private static byte[][] storeAndRetrieve(HostCopies copies, HostPieces pieces, MemorySegment[] source, Arena arena) {
        MemorySegment pool = arena.allocate(POOL_BYTES, 4096);
        copies.copy(pieces, i -> source[i], pool, true);
        MemorySegment[] back = new MemorySegment[TENSORS];
        for (int i = 0; i < TENSORS; i++) {
            back[i] = arena.allocate(TENSOR_BYTES, 4096);
        }
        copies.copy(pieces, i -> back[i], pool, false);
        byte[][] out = new byte[1 + TENSORS][];
        out[0] = bytes(pool);
        for (int i = 0; i < TENSORS; i++) {
            out[1 + i] = bytes(back[i]);
        }
        return out;
    }

    private static final StreamingCopy.Load JAVA = new StreamingCopy.Absent("MemorySegment.copy, as the test asks");

    /** The server's two copiers: MemorySegment.copy, and the native non-temporal one (which every build with a C compiler has). */
    private static List<StreamingCopy.Load> copiers() {
        StreamingCopyTest.loaded();
        return List.of(JAVA, StreamingCopy.load());
    }

    @Test
    void aCopySpreadOverSeveralThreadsLandsExactlyTheBytesOfOneThreadsCopy() {
        for (StreamingCopy.Load copier : copiers()) {
            aCopySpreadOverSeveralThreadsLandsExactlyTheBytesOfOneThreadsCopy(copier);
        }
    }

    private void aCopySpreadOverSeveralThreadsLandsExactlyTheBytesOfOneThreadsCopy(StreamingCopy.Load copier) {
        LongAdder transferRuns = new LongAdder();
        LongAdder helperRuns = new LongAdder();
        try (Arena arena = Arena.ofShared(); HostCopies copies = HostCopies.start(4, RUN_BYTES, copier, transferRuns, helperRuns)) {
            assertEquals(Map.of("threads", 4, "copy", copier.describe()), copies.status(), "/status cpu_copy");
            long expectedRuns = 0;
            for (boolean transposed : new boolean[] {false, true}) {
                HostPieces pieces = pieces(transposed ? 2 : 1, transposed);
                MemorySegment[] source = randomTensors(arena, 3);
                byte[][] expected = storeAndRetrieve(HostCopies.inline(), pieces, source, arena);
                byte[][] actual = storeAndRetrieve(copies, pieces, source, arena);
                expectedRuns += 2 * (pieces.bytes() / RUN_BYTES);
                assertTrue(pieces.bytes() / RUN_BYTES > 4, "more runs than threads: " + pieces.bytes());
                for (int i = 0; i < expected.length; i++) {
                    assertArrayEquals(expected[i], actual[i], (i == 0 ? "the pool" : "tensor " + (i - 1)) + ", transposed " + transposed);
                }
            }
            assertEquals(expectedRuns, transferRuns.sum() + helperRuns.sum(), "each of the 4 copies cut into one run per 512 KiB");
        }
    }

    @Test
    void severalTransferThreadsShareTheCopyThreadsAndEachGetsItsOwnBytes() throws Exception {
        LongAdder transferRuns = new LongAdder();
        LongAdder helperRuns = new LongAdder();
        try (Arena arena = Arena.ofShared(); HostCopies copies = HostCopies.start(3, RUN_BYTES, JAVA, transferRuns, helperRuns)) {
            ExecutorService callers = Executors.newFixedThreadPool(4);
            try {
                List<Future<Boolean>> results = new ArrayList<>();
                for (int caller = 0; caller < 4; caller++) {
                    int seed = caller;
                    results.add(callers.submit(() -> {
                        HostPieces pieces = pieces(10 + seed, seed % 2 == 0);
                        MemorySegment[] source = randomTensors(arena, 20 + seed);
                        boolean same = true;
                        for (int round = 0; round < 3; round++) {
                            MemorySegment pool = arena.allocate(POOL_BYTES, 4096);
                            MemorySegment expected = arena.allocate(POOL_BYTES, 4096);
                            HostCopies.inline().copy(pieces, i -> source[i], expected, true);
                            copies.copy(pieces, i -> source[i], pool, true);
                            same &= pool.mismatch(expected) == -1;
                        }
                        return same;
                    }));
                }
                for (Future<Boolean> result : results) {
                    assertTrue(result.get(), "every caller's pool holds exactly its own pieces");
                }
            } finally {
                callers.shutdown();
            }
            assertTrue(helperRuns.sum() > 0, "the copy threads took runs: " + helperRuns.sum());
        }
    }

    @Test
    @Timeout(60)
    void aCopyWhoseHelpersAreHeldElsewhereIsFinishedByItsTransferThread() throws Exception {
        LongAdder transferRuns = new LongAdder();
        LongAdder helperRuns = new LongAdder();
        CountDownLatch release = new CountDownLatch(1);
        ExecutorService other = Executors.newSingleThreadExecutor();
        try (Arena arena = Arena.ofShared(); HostCopies copies = HostCopies.start(3, RUN_BYTES, JAVA, transferRuns, helperRuns)) {
            // copy A: its transfer thread and both helpers stay inside their first run until released
            HostPieces held = pieces(30, false);
            MemorySegment[] heldSource = randomTensors(arena, 31);
            MemorySegment heldPool = arena.allocate(POOL_BYTES, 4096);
            Future<?> first = other.submit(() -> copies.copy(held, i -> {
                awaitQuietly(release);
                return heldSource[i];
            }, heldPool, true));
            await().atMost(Duration.ofSeconds(20)).until(HostCopiesTest::copyThreadsHeld);
            // copy B: its tickets wait in the queue behind A, so its transfer thread copies every run itself
            HostPieces pieces = pieces(32, true);
            MemorySegment[] source = randomTensors(arena, 33);
            MemorySegment expected = arena.allocate(POOL_BYTES, 4096);
            HostCopies.inline().copy(pieces, i -> source[i], expected, true);
            MemorySegment pool = arena.allocate(POOL_BYTES, 4096);
            long runs = copies.runs(pieces.bytes());
            long before = transferRuns.sum();
            copies.copy(pieces, i -> source[i], pool, true);
            assertEquals(-1, pool.mismatch(expected), "every byte of B landed while the helpers were held");
            assertEquals(runs, transferRuns.sum() - before, "B's transfer thread copied all " + runs + " runs");
            release.countDown();
            first.get(20, TimeUnit.SECONDS);
            MemorySegment heldExpected = arena.allocate(POOL_BYTES, 4096);
            HostCopies.inline().copy(held, i -> heldSource[i], heldExpected, true);
            assertEquals(-1, heldPool.mismatch(heldExpected), "A landed too once its helpers went on");
        } finally {
            release.countDown();
            other.shutdownNow();
        }
    }

    @Test
    void aSegmentTruncatedUnderTheCopyFailsThatCopyAndTheThreadsGoOn() throws Exception {
        for (StreamingCopy.Load copier : copiers()) {
            aSegmentTruncatedUnderTheCopyFailsThatCopyAndTheThreadsGoOn(copier);
        }
    }

    private void aSegmentTruncatedUnderTheCopyFailsThatCopyAndTheThreadsGoOn(StreamingCopy.Load copier) throws Exception {
        // a worker may shrink its shm file at any time: the JVM's copy turns the SIGBUS into an InternalError, the native one
        // into an IllegalStateException, which fails the copy (HostCopyPath answers the request with a failure), not the process
        Path file = Files.createTempFile(Path.of("/dev/shm"), "lmcache_test_truncated_", "");
        try (Arena arena = Arena.ofShared(); HostCopies copies = HostCopies.start(4, RUN_BYTES, copier, new LongAdder(), new LongAdder());
             FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            channel.write(ByteBuffer.allocate(1), TENSOR_BYTES - 1);
            MemorySegment mapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, TENSOR_BYTES, arena);
            mapped.fill((byte) 7);
            channel.truncate(0);
            HostPieces pieces = new HostPieces();
            pieces.piece(0, 0, 0, TENSOR_BYTES);
            MemorySegment pool = arena.allocate(POOL_BYTES, 4096);
            IllegalStateException failed = assertThrows(IllegalStateException.class, () -> copies.copy(pieces, i -> mapped, pool, true));
            assertTrue(failed.getCause() instanceof InternalError || failed.getCause().getMessage().contains("SIGBUS"),
                    "the fault, as the copier reports it: " + failed.getCause());
            HostPieces healthy = pieces(40, false);
            MemorySegment[] source = randomTensors(arena, 41);
            byte[][] expected = storeAndRetrieve(HostCopies.inline(), healthy, source, arena);
            assertArrayEquals(expected[0], storeAndRetrieve(copies, healthy, source, arena)[0], "the next copy lands every byte");
        } finally {
            Files.deleteIfExists(file);
        }
    }

    /** Both copy threads are parked in the held copy (waiting on its latch). */
    private static boolean copyThreadsHeld() {
        return copyThreads().stream().filter(t -> t.getState() == Thread.State.WAITING || t.getState() == Thread.State.TIMED_WAITING)
                .filter(t -> Arrays.stream(t.getStackTrace()).anyMatch(f -> f.getMethodName().equals("awaitQuietly"))).count() == 2;
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Test
    void copyThreadsAreNamedBoundedAndJoinedAtCloseAfterWhichCopiesRunOnTheCaller() {
        LongAdder transferRuns = new LongAdder();
        int before = copyThreads().size();
        HostCopies copies = HostCopies.start(5, RUN_BYTES, JAVA, transferRuns, new LongAdder());
        assertEquals(before + 4, copyThreads().size(), "threads - 1 started: the transfer thread is the other copier");
        copies.close();
        assertEquals(before, copyThreads().size(), "every lmcache-copy-N thread left at close");
        try (Arena arena = Arena.ofShared()) {
            HostPieces pieces = pieces(5, false);
            MemorySegment[] source = randomTensors(arena, 6);
            byte[][] expected = storeAndRetrieve(HostCopies.inline(), pieces, source, arena);
            long runsBefore = transferRuns.sum();
            byte[][] after = storeAndRetrieve(copies, pieces, source, arena);
            assertArrayEquals(expected[0], after[0], "a copy after close still lands every byte");
            assertEquals(runsBefore + 2, transferRuns.sum(), "on the transfer thread, one run each");
        }
    }

    @Test
    void aRunThatFailsFailsTheCopyAfterTheOthersEnded() {
        try (Arena arena = Arena.ofShared(); HostCopies copies = HostCopies.start(4, RUN_BYTES, JAVA, new LongAdder(), new LongAdder())) {
            HostPieces pieces = new HostPieces();
            MemorySegment small = arena.allocate(1 << 20);
            MemorySegment big = arena.allocate(8L << 20);
            pieces.piece(1, 0, 0, 8L << 20);
            pieces.piece(0, 0, 8L << 20, 2L << 20); // past the end of tensor 0
            MemorySegment pool = arena.allocate(16L << 20);
            assertThrows(RuntimeException.class, () -> copies.copy(pieces, i -> i == 0 ? small : big, pool, true));
        }
    }

    @Test
    void aCopyIsCutIntoOneRunPerRunBytesAtMostSixtyFourAThread() {
        try (HostCopies copies = HostCopies.start(4, 1L << 20, JAVA, new LongAdder(), new LongAdder())) {
            assertEquals(1, copies.runs(1L << 19), "less than a run stays whole");
            assertEquals(128, copies.runs(128L << 20));
            assertEquals(4 * HostCopies.MAX_RUNS_PER_THREAD, copies.runs(1L << 40), "bounded by the threads");
        }
        assertEquals(1, HostCopies.inline().runs(1L << 40), "one thread: one run");
    }

    @Test
    void theDefaultIsOneThreadPerCoreBoundedPerNumaNode() {
        assertEquals(2, HostCopies.defaultThreads(2, 1));
        assertEquals(16, HostCopies.defaultThreads(16, 1));
        assertEquals(16, HostCopies.defaultThreads(64, 0), "no node information reads as one node");
        assertEquals(32, HostCopies.defaultThreads(64, 2));
        assertEquals(1, HostCopies.defaultThreads(1, 4));
    }

    private static List<Thread> copyThreads() {
        return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().startsWith("lmcache-copy-") && t.isAlive()).toList();
    }
}
