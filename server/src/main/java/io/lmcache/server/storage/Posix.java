package io.lmcache.server.storage;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/** The few libc calls the pool needs that the JDK has no API for: anonymous mmap without zeroing, and madvise. */
final class Posix {
    static final int PROT_READ = 1;
    static final int PROT_WRITE = 2;
    static final int MAP_PRIVATE = 0x02;
    static final int MAP_ANONYMOUS = 0x20;
    static final int MAP_NORESERVE = 0x4000;
    /** Linux 5.14+: populate (prefault) pages writable, far faster than touching them one by one. */
    static final int MADV_POPULATE_WRITE = 23;

    private static final Linker LINKER = Linker.nativeLinker();
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
}
