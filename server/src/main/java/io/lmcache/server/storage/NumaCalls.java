package io.lmcache.server.storage;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.BitSet;

/** The two kernel calls NUMA placement makes; an interface so the host-only tests stand in for a refusing kernel. */
public interface NumaCalls {
    /** {@code EPERM}: the call is not allowed (a container's seccomp profile without {@code CAP_SYS_NICE}). */
    int EPERM = 1;
    /** {@code ENOSYS}: the kernel has no such call. */
    int ENOSYS = 38;

    /** Sets the memory policy of a range not touched yet to "preferably on this node" ({@code mbind}); 0 or the errno. */
    int preferNode(MemorySegment range, int node);

    /** Binds the calling thread to these CPUs ({@code sched_setaffinity(0, ...)}); 0 or the errno. */
    int bindThread(BitSet cpus);

    /** The real calls, through FFM: {@code mbind} is a raw syscall (glibc does not export it; libnuma is not needed). */
    static NumaCalls linux() {
        return LinuxNumaCalls.INSTANCE;
    }

    /** Linux on x86-64 or aarch64. */
    final class LinuxNumaCalls implements NumaCalls {
        static final LinuxNumaCalls INSTANCE = new LinuxNumaCalls();
        /** MPOL_PREFERRED: allocate there while the node has room, elsewhere after (never the OOM killer, as MPOL_BIND can). */
        private static final int MPOL_PREFERRED = 1;
        private static final long SYS_MBIND = switch (System.getProperty("os.arch")) {
            case "aarch64", "arm64" -> 235;
            default -> 237;
        };
        private static final Linker LINKER = Linker.nativeLinker();
        private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
        private static final VarHandle ERRNO = CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
        private static final MethodHandle SYSCALL6 = LINKER.downcallHandle(LINKER.defaultLookup().find("syscall").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG,
                        ValueLayout.JAVA_LONG, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG),
                Linker.Option.firstVariadicArg(1), Linker.Option.captureCallState("errno"));
        private static final MethodHandle SCHED_SETAFFINITY = LINKER.downcallHandle(
                LINKER.defaultLookup().find("sched_setaffinity").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.ADDRESS),
                Linker.Option.captureCallState("errno"));

        private LinuxNumaCalls() {}

        @Override
        public int preferNode(MemorySegment range, int node) {
            if (node < 0 || node >= 64) {
                return 22; // EINVAL: one word of node mask covers the nodes of any host this runs on
            }
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment mask = arena.allocate(ValueLayout.JAVA_LONG);
                mask.set(ValueLayout.JAVA_LONG, 0, 1L << node);
                MemorySegment state = arena.allocate(CALL_STATE);
                // maxnode is one more than the bits the kernel reads (it decrements it first)
                long rc = (long) SYSCALL6.invokeExact(state, SYS_MBIND, range, range.byteSize(), (long) MPOL_PREFERRED, mask, 65L, 0L);
                return rc == 0 ? 0 : (int) ERRNO.get(state, 0L);
            } catch (Throwable t) {
                return ENOSYS;
            }
        }

        @Override
        public int bindThread(BitSet cpus) {
            long[] words = cpus.toLongArray();
            if (words.length == 0) {
                return 22;
            }
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment mask = arena.allocateFrom(ValueLayout.JAVA_LONG, words);
                MemorySegment state = arena.allocate(CALL_STATE);
                int rc = (int) SCHED_SETAFFINITY.invokeExact(state, 0, mask.byteSize(), mask);
                return rc == 0 ? 0 : (int) ERRNO.get(state, 0L);
            } catch (Throwable t) {
                return ENOSYS;
            }
        }
    }
}
