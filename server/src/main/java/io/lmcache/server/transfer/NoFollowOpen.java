package io.lmcache.server.transfer;

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
 * {@code open(2)} with {@code O_NOFOLLOW} through the FFM API, for the one thing the JDK cannot do:
 * hand out the descriptor, so that a file can be checked and mapped through {@code /proc/self/fd/N}
 * (the open file itself) rather than by its path again. {@code O_NONBLOCK} keeps a FIFO planted in
 * place of a segment from blocking the open.
 */
final class NoFollowOpen {
    static final int ENOENT = 2;
    static final int ELOOP = 40;
    static final int EISDIR = 21;
    /** A UNIX socket in place of a segment. */
    static final int ENXIO = 6;
    private static final int O_RDWR = 02;
    private static final int O_NONBLOCK = 04000;
    private static final int O_CLOEXEC = 02000000;
    private static final int O_NOCTTY = 0400;
    /** Differs between architectures (asm-generic vs x86): the two this server runs on. */
    private static final int O_NOFOLLOW = switch (System.getProperty("os.arch")) {
        case "aarch64", "arm64" -> 0100000;
        default -> 0400000;
    };

    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final MethodHandle OPEN = LINKER.downcallHandle(LINKER.defaultLookup().find("open").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT),
            // open is variadic (the mode, read only with O_CREAT): called as such, so the ABI's variadic rules hold
            Linker.Option.firstVariadicArg(2), Linker.Option.captureCallState("errno"));
    private static final MethodHandle CLOSE = LINKER.downcallHandle(LINKER.defaultLookup().find("close").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));

    private NoFollowOpen() {}

    /** The descriptor of {@code path} opened read-write without following a link, or minus the errno. */
    static int open(Path path) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            int fd = (int) OPEN.invokeExact(state, arena.allocateFrom(path.toString()), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0);
            return fd >= 0 ? fd : -(int) ERRNO.get(state, 0L);
        } catch (Throwable t) {
            throw new IllegalStateException("open(2) failed to run", t);
        }
    }

    /** The open file itself, for stat and open: the kernel resolves it to the descriptor's inode, never by path. */
    static Path procPath(int fd) {
        return Path.of("/proc/self/fd", Integer.toString(fd));
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
