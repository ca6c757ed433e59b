package io.lmcache.server.transfer;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Locale;
import java.util.Objects;

/**
 * The CPU path's copy with non-temporal stores, from {@code liblmcache_hostcopy.so} (server/src/main/c): an ordinary store reads
 * each destination line before writing it, so a copy costs three bytes of memory traffic per byte instead of two, which on a
 * many-core host is the limit; the JVM
 * writes without that read only in copies of 2.5 MB a call, and a KV piece is 32-512 KiB (bench/RESULTS.md#cpu-copy-path).
 *
 * <p>Guarded: a worker may truncate its shm segment while the server copies from or into it. The library arms a per-thread
 * jump buffer around each copy and its SIGBUS handler returns the copy as failed ({@link #copy} then throws, as
 * {@code MemorySegment.copy} throws {@link InternalError} on the same fault); every other SIGBUS goes to the JVM's handler, which
 * the library chains to. One per JVM (the handler is the process's): {@link #load} loads and checks it once.
 *
 * <p>The pool's segment is passed to each call, so the linker keeps its arena alive until it returns; a worker's tensors are
 * released only after the last transfer that uses them ended (the release thread), so they outlive the copy too.
 */
public final class StreamingCopy implements PieceCopy {
    static final String RESOURCE = "/native/linux-x86_64/liblmcache_hostcopy.so";
    /** Shorter copies (a head-major piece's rows) stay in Java: the call costs more than the reads it saves (the library's own bar). */
    static final long STREAM_MIN_BYTES = 4096;
    /** What {@link #load} found: the copy, or why the server copies in Java. */
    public sealed interface Load permits Loaded, Absent {
        /** For the start-up log line and {@code /status}: {@code "native non-temporal stores (256-bit)"}, or why not. */
        String describe();

        /** How each piece is copied: the native copy where it loaded, else {@link PieceCopy#JAVA}. */
        PieceCopy copier();
    }

    /** The library loaded and copied its self-test correctly. */
    public record Loaded(StreamingCopy copy, int vectorBits) implements Load {
        @Override
        public String describe() {
            return "native non-temporal stores (" + vectorBits + "-bit)";
        }

        @Override
        public PieceCopy copier() {
            return copy;
        }
    }

    /** The library is not there or did not work; the server copies with {@code MemorySegment.copy}. */
    public record Absent(String why) implements Load {
        @Override
        public String describe() {
            return "MemorySegment.copy (" + why + ")";
        }

        @Override
        public PieceCopy copier() {
            return PieceCopy.JAVA;
        }
    }

    private static Load loaded;

    /** Pieces per native call at most: a run of 1 MiB holds 32 blocks of 32 KiB, a transposed one more. */
    private static final int MAX_PIECES = 256;
    private static final long PIECE_BYTES = 3 * Long.BYTES;
    /** Each copying thread's descriptor buffer (freed with the thread: its arena is automatic). */
    private static final ThreadLocal<MemorySegment> PIECES =
            ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(MAX_PIECES * PIECE_BYTES, Long.BYTES));

    private final MethodHandle copy;

    private StreamingCopy(MethodHandle copy) {
        this.copy = copy;
    }

    /** The library, loaded (and its SIGBUS handler installed) on the first call; later calls give the same answer. */
    public static synchronized Load load() {
        if (loaded == null) {
            loaded = tryLoad();
        }
        return loaded;
    }

    private static Load tryLoad() {
        String platform = System.getProperty("os.name", "") + "/" + System.getProperty("os.arch", "");
        if (!platform.toLowerCase(Locale.ROOT).equals("linux/amd64")) {
            return new Absent("no library for " + platform);
        }
        try (InputStream in = StreamingCopy.class.getResourceAsStream(RESOURCE)) {
            if (in == null) {
                return new Absent("not built: no C compiler when the server was built (server/src/main/c/build.sh)");
            }
            return link(extract(in));
        } catch (IOException | RuntimeException e) {
            return new Absent("could not load " + RESOURCE + ": " + e);
        }
    }

    /** Into a directory of this user's alone, made for it and gone once loaded (the mapping stays). */
    private static Path extract(InputStream in) throws IOException {
        Path dir = Files.createTempDirectory("lmcache-native-", PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        Path file = dir.resolve("liblmcache_hostcopy.so");
        try (var out = Files.newOutputStream(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS)) {
            in.transferTo(out);
        } catch (IOException e) {
            Files.deleteIfExists(file);
            Files.deleteIfExists(dir);
            throw e;
        }
        return file;
    }

    private static Load link(Path file) throws IOException {
        try {
            Linker linker = Linker.nativeLinker();
            SymbolLookup library = SymbolLookup.libraryLookup(file, Arena.global());
            MethodHandle install = linker.downcallHandle(library.findOrThrow("lmc_install"), FunctionDescriptor.of(ValueLayout.JAVA_INT));
            MethodHandle width = linker.downcallHandle(library.findOrThrow("lmc_vector_width"), FunctionDescriptor.of(ValueLayout.JAVA_INT));
            MethodHandle copy = linker.downcallHandle(library.findOrThrow("lmc_copy_pieces"),
                    FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
            if ((int) install.invokeExact() != 0) {
                return new Absent("lmc_install failed (sigaction)");
            }
            StreamingCopy streaming = new StreamingCopy(copy);
            String wrong = streaming.selfTest();
            return wrong == null ? new Loaded(streaming, (int) width.invokeExact()) : new Absent(wrong);
        } catch (Throwable e) {
            return new Absent("could not link " + file.getFileName() + ": " + e);
        } finally {
            Files.deleteIfExists(file);
            Files.deleteIfExists(file.getParent());
        }
    }

    /** Copies a patterned buffer at an odd offset, across the streaming threshold; null when the bytes came out alike. */
    private String selfTest() {
        try (Arena arena = Arena.ofConfined()) {
            int bytes = 300_001;
            MemorySegment from = arena.allocate(bytes + 64, 64).asSlice(3, bytes);
            MemorySegment to = arena.allocate(bytes + 64, 64).asSlice(17, bytes);
            for (int i = 0; i < bytes; i++) {
                from.set(ValueLayout.JAVA_BYTE, i, (byte) (i * 31 + 7));
            }
            copy(from, 0, to, 0, bytes);
            return to.mismatch(from) == -1 ? null : "the self-test's bytes differed at " + to.mismatch(from);
        }
    }

    /**
     * Copies {@code length} bytes at once (a batch of one; the tests', the self-test's); see {@link NativeBatch#copy}.
     */
    public void copy(MemorySegment from, long fromOffset, MemorySegment to, long toOffset, long length) {
        Batch batch = batch(to.isNative() ? to : from);
        batch.copy(from, fromOffset, to, toOffset, length);
        batch.flush();
    }

    @Override
    public Batch batch(MemorySegment pool) {
        return new NativeBatch(pool, PIECES.get());
    }

    /**
     * A run's pieces, held in this thread's descriptor buffer and copied by one call per {@link #MAX_PIECES} and at the flush:
     * one jump buffer armed and one acquire of the pool's arena per call, not per piece (sixteen threads acquiring that one
     * arena per 32 KiB piece would contend on its counter).
     */
    private final class NativeBatch implements Batch {
        private final MemorySegment pool;
        private final MemorySegment pieces;
        private int count;

        NativeBatch(MemorySegment pool, MemorySegment pieces) {
            this.pool = pool;
            this.pieces = pieces;
        }

        /**
         * Holds the piece (its bounds checked now, as {@code MemorySegment.copy} checks them); copies under
         * {@link #STREAM_MIN_BYTES} and heap segments go by {@code MemorySegment.copy} at once (the library takes addresses).
         */
        @Override
        public void copy(MemorySegment from, long fromOffset, MemorySegment to, long toOffset, long length) {
            if (length < STREAM_MIN_BYTES || !from.isNative() || !to.isNative()) {
                MemorySegment.copy(from, fromOffset, to, toOffset, length);
                return;
            }
            Objects.checkFromIndexSize(fromOffset, length, from.byteSize());
            Objects.checkFromIndexSize(toOffset, length, to.byteSize());
            long at = count++ * PIECE_BYTES;
            pieces.set(ValueLayout.JAVA_LONG, at, to.address() + toOffset);
            pieces.set(ValueLayout.JAVA_LONG, at + Long.BYTES, from.address() + fromOffset);
            pieces.set(ValueLayout.JAVA_LONG, at + 2 * Long.BYTES, length);
            if (count == MAX_PIECES) {
                flush();
            }
        }

        /**
         * Copies the held pieces; throws {@link IllegalStateException} when a page of either side raised SIGBUS (a shm segment
         * truncated under the copy), after which some of the bytes may have been copied.
         */
        @Override
        public void flush() {
            if (count == 0) {
                return;
            }
            int pieceCount = count;
            count = 0;
            int failed;
            try {
                failed = (int) copy.invokeExact(pool, pieces, pieceCount);
            } catch (Throwable e) {
                throw new IllegalStateException("the native copy could not be called: " + e, e);
            }
            if (failed != 0) {
                throw new IllegalStateException("a page of the copy raised SIGBUS (a shared-memory segment truncated under it)");
            }
        }
    }
}
