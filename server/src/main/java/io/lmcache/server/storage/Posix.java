package io.lmcache.server.storage;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.file.Path;

/**
 * The few libc calls the pool needs that the JDK has no API for: anonymous mmap without zeroing,
 * madvise, and creating its file with an exact mode ({@code fchmod} on the new descriptor: the
 * umask alters the mode {@code open} gives, and a chmod by path could follow a name swapped meanwhile).
 */
final class Posix {
    static final int PROT_READ = 1;
    static final int PROT_WRITE = 2;
    static final int MAP_PRIVATE = 0x02;
    static final int MAP_ANONYMOUS = 0x20;
    static final int MAP_NORESERVE = 0x4000;
    /** Linux 5.14+: populate (prefault) pages writable, far faster than touching them one by one. */
    static final int MADV_POPULATE_WRITE = 23;

    private static final int O_RDWR = 02;
    private static final int O_CREAT = 0100;
    private static final int O_EXCL = 0200;
    private static final int O_CLOEXEC = 02000000;
    /** Differs between architectures (asm-generic vs x86): the two this server runs on. */
    private static final int O_NOFOLLOW = switch (System.getProperty("os.arch")) {
        case "aarch64", "arm64" -> 0100000;
        default -> 0400000;
    };
    /** Created with: owner read-write, so the file is never wider than that before fchmod gives the asked mode. */
    private static final int OWNER_ONLY = 0600;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final MethodHandle OPEN = LINKER.downcallHandle(LINKER.defaultLookup().find("open").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT),
            Linker.Option.firstVariadicArg(2), Linker.Option.captureCallState("errno"));
    private static final MethodHandle FCHMOD = LINKER.downcallHandle(LINKER.defaultLookup().find("fchmod").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT), Linker.Option.captureCallState("errno"));
    private static final MethodHandle CLOSE = LINKER.downcallHandle(LINKER.defaultLookup().find("close").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
    private static final MethodHandle MMAP = downcall("mmap", FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS,
            ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG));
    private static final MethodHandle MUNMAP = downcall("munmap", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS,
            ValueLayout.JAVA_LONG));
    private static final MethodHandle MADVISE = downcall("madvise", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS,
            ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT));

    private Posix() {}

    private static MethodHandle downcall(String name, FunctionDescriptor descriptor) {
        MemorySegment symbol = LINKER.defaultLookup().find(name).orElseThrow(() -> new IllegalStateException("libc has no " + name));
        return LINKER.downcallHandle(symbol, descriptor);
    }

    /** Address of a new private anonymous mapping (pages appear, zeroed, on first touch), or 0 on failure. */
    static long mmapAnonymous(long bytes) {
        try {
            MemorySegment address = (MemorySegment) MMAP.invokeExact(MemorySegment.NULL, bytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0L);
            return address.address() == -1L ? 0 : address.address();
        } catch (Throwable t) {
            throw new IllegalStateException("mmap failed", t);
        }
    }

    static void munmap(long address, long bytes) {
        try {
            int rc = (int) MUNMAP.invokeExact(MemorySegment.ofAddress(address), bytes);
            if (rc != 0) {
                throw new IllegalStateException("munmap returned " + rc);
            }
        } catch (Throwable t) {
            throw new IllegalStateException("munmap failed", t);
        }
    }

    /** True when the kernel did it; false when it cannot (old kernel), and the caller touches pages itself. */
    static boolean madvise(MemorySegment range, int advice) {
        try {
            return (int) MADVISE.invokeExact(range, range.byteSize(), advice) == 0;
        } catch (Throwable t) {
            return false;
        }
    }

    /**
     * Creates {@code path} ({@code O_EXCL}: fails when anything holds the name, never follows a link) and gives the new
     * descriptor exactly {@code mode}; returns the descriptor, which the caller closes with {@link #close}.
     */
    static int createExclusive(Path path, int mode) throws IOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            int fd = (int) OPEN.invokeExact(state, arena.allocateFrom(path.toString()), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    OWNER_ONLY);
            if (fd < 0) {
                throw new IOException("cannot create " + path + " (errno " + (int) ERRNO.get(state, 0L) + ")");
            }
            if ((int) FCHMOD.invokeExact(state, fd, mode) != 0) {
                int errno = (int) ERRNO.get(state, 0L);
                close(fd);
                throw new IOException("cannot set the mode of " + path + " (errno " + errno + ")");
            }
            return fd;
        } catch (IOException e) {
            throw e;
        } catch (Throwable t) {
            throw new IllegalStateException("open(2) or fchmod(2) failed to run", t);
        }
    }

    static void close(int fd) {
        try {
            int rc = (int) CLOSE.invokeExact(fd);
            assert rc == 0 : "close(" + fd + ") returned " + rc;
        } catch (Throwable t) {
            throw new IllegalStateException("close(2) failed to run", t);
        }
    }
}
