package io.lmcache.server.transfer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The native non-temporal copy: it loads wherever the build had a C compiler (CI requires it), lands exactly the bytes of
 * {@code MemorySegment.copy} at every size and alignment around its thresholds, and a shm segment truncated under it fails
 * the copy, again and again on the same thread, while the JVM's own copies keep turning the same fault into an InternalError
 * (the library chains every SIGBUS that is not its own to the JVM's handler).
 */
class StreamingCopyTest {
    private static final long MAPPED = 1L << 20;

    /** The copy, which must load wherever the build made the library (CI: LMCACHE_REQUIRE_NATIVE=1 makes a missing one fail the build). */
    static StreamingCopy loaded() {
        StreamingCopy.Load load = StreamingCopy.load();
        return assertInstanceOf(StreamingCopy.Loaded.class, load, "built into target/classes by server/src/main/c/build.sh: " + load.describe())
                .copy();
    }

    @Test
    void itLoadsWhereverTheBuildMadeItAndSaysWhyNotElsewhere() {
        boolean built = StreamingCopy.class.getResource(StreamingCopy.RESOURCE) != null;
        if ("1".equals(System.getenv("LMCACHE_REQUIRE_NATIVE")) || built) {
            StreamingCopy.Loaded loaded = assertInstanceOf(StreamingCopy.Loaded.class, StreamingCopy.load());
            assertTrue(loaded.vectorBits() == 128 || loaded.vectorBits() == 256, "SSE2 or AVX2: " + loaded.vectorBits());
            assertTrue(loaded.describe().startsWith("native non-temporal stores"), loaded.describe());
        } else {
            StreamingCopy.Absent absent = assertInstanceOf(StreamingCopy.Absent.class, StreamingCopy.load());
            assertTrue(absent.why().contains("not built") || absent.why().contains("no library for"), absent.why());
        }
        assertTrue(StreamingCopy.load() == StreamingCopy.load(), "loaded once per JVM: the SIGBUS handler is the process's");
    }

    @Test
    void everySizeAndAlignmentLandsTheBytesOfMemorySegmentCopy() {
        StreamingCopy copy = loaded();
        Random random = new Random(52);
        // 16 KiB: the AVX2 loop's four-block steps; a size just past a multiple leaves a tail for the one-stream loop
        long[] sizes = {1, 63, 64, 4095, 4096, 4097, 4096 + 127, 4096 + 128, 16_384 - 1, 16_384, 16_384 + 63, 16_384 + 128 + 64,
                49_152 + 4_096 + 5, 65_536 + 13, 512 << 10, (1 << 20) + 5};
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment from = arena.allocate(2L << 20, 4096);
            for (long i = 0; i < from.byteSize(); i += 8) {
                from.set(ValueLayout.JAVA_LONG_UNALIGNED, i, random.nextLong());
            }
            MemorySegment to = arena.allocate(2L << 20, 4096);
            MemorySegment expected = arena.allocate(2L << 20, 4096);
            for (long size : sizes) {
                for (int fromAt : new int[] {0, 1, 33, 4096}) {
                    for (int toAt : new int[] {0, 7, 64, 100}) {
                        to.fill((byte) 0x5a);
                        expected.fill((byte) 0x5a);
                        copy.copy(from, fromAt, to, toAt, size);
                        MemorySegment.copy(from, fromAt, expected, toAt, size);
                        assertEquals(-1, to.mismatch(expected), "size " + size + " from +" + fromAt + " to +" + toAt
                                + ": the bytes before and after the range untouched too");
                    }
                }
            }
            assertThrows(IndexOutOfBoundsException.class, () -> copy.copy(from, (2L << 20) - 4096, to, 0, 8192), "bounds checked first");
        }
    }

    @Test
    void aBatchOfMorePiecesThanOneCallHoldsLandsEachPieceWhereItBelongs() {
        StreamingCopy copy = loaded();
        try (Arena arena = Arena.ofConfined()) {
            int pieces = 600; // more than two calls' worth: the batch flushes when full and at the end
            MemorySegment from = arena.allocate(pieces * 8192L, 4096);
            for (long i = 0; i < from.byteSize(); i += 8) {
                from.set(ValueLayout.JAVA_LONG, i, i * 0x9E3779B97F4A7C15L);
            }
            MemorySegment to = arena.allocate(pieces * 8192L, 4096);
            MemorySegment expected = arena.allocate(pieces * 8192L, 4096);
            PieceCopy.Batch batch = copy.batch(to);
            for (int i = 0; i < pieces; i++) {
                // backwards, so each piece's place in the batch differs from its place in memory; 100 bytes and 4 KiB+ both
                long length = i % 7 == 0 ? 100 : 4096 + i;
                long fromAt = (pieces - 1 - i) * 8192L;
                long toAt = i * 8192L + (i % 3);
                batch.copy(from, fromAt, to, toAt, length);
                MemorySegment.copy(from, fromAt, expected, toAt, length);
            }
            batch.flush();
            assertEquals(-1, to.mismatch(expected));
        }
    }

    @Test
    void aSegmentTruncatedUnderTheCopyFailsItEachTimeAndTheJvmsOwnFaultsStillBecomeInternalErrors() throws Exception {
        StreamingCopy copy = loaded();
        Path file = Files.createTempFile(Path.of("/dev/shm"), "lmcache_test_streaming_", "");
        try (Arena arena = Arena.ofShared(); FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            channel.write(ByteBuffer.allocate(1), MAPPED - 1);
            MemorySegment mapped = channel.map(FileChannel.MapMode.READ_WRITE, 0, MAPPED, arena);
            mapped.fill((byte) 7);
            MemorySegment pool = arena.allocate(MAPPED, 4096);
            copy.copy(mapped, 0, pool, 0, MAPPED);
            assertEquals(7, pool.get(ValueLayout.JAVA_BYTE, MAPPED - 1), "whole, before the worker shrinks it");
            channel.truncate(64 << 10);
            String blocked = blockedSignals();
            for (int round = 0; round < 3; round++) {
                // reading past the new end, then writing past it: SIGBUS both ways, and the handler stays armed after a jump
                assertThrows(IllegalStateException.class, () -> copy.copy(mapped, 0, pool, 0, MAPPED), "round " + round + " from");
                assertThrows(IllegalStateException.class, () -> copy.copy(pool, 0, mapped, 0, MAPPED), "round " + round + " into");
            }
            assertEquals(blocked, blockedSignals(), "the thread's signal mask after the jumps is the one it had (not the handler's)");
            copy.copy(pool, 0, mapped, 0, 64 << 10);
            assertEquals(7, mapped.get(ValueLayout.JAVA_BYTE, (64 << 10) - 1), "what is left of the segment still copies");
            InternalError jvms = assertThrows(InternalError.class, () -> MemorySegment.copy(mapped, 0, pool, 0, MAPPED),
                    "a SIGBUS outside the library's copies reaches the JVM's handler");
            assertTrue(jvms.getMessage().contains("unsafe memory access"), jvms.getMessage());
        } finally {
            Files.deleteIfExists(file);
        }
    }

    /** This thread's blocked signals, as the kernel reports them ({@code SigBlk}: hex mask). */
    private static String blockedSignals() throws IOException {
        return Files.readAllLines(Path.of("/proc/thread-self/status")).stream().filter(line -> line.startsWith("SigBlk:")).findFirst()
                .orElseThrow();
    }
}
