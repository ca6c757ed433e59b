package io.lmcache.server.cuda;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.reflect.Method;
import jcuda.NativePointerObject;
import jcuda.driver.CUstream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver's batched copy ({@code cuMemcpyBatchAsync}, CUDA 12.8+; JCuda 12.6 has no binding, so
 * FFM calls it in {@code libcuda.so.1}): many pointer-to-pointer copies in one call, done by the
 * copy engines. A transfer's head goes this way when its lane is idle: a kernel launched right
 * after the worker's process used the GPU waits ~140–180 µs for the GPU to switch contexts, a copy
 * does not (bench/RESULTS.md#gpu-one-request-in-flight), so the head's bytes cross the link while the first
 * gather or scatter waits. One instance per lane, used under the lane's lock: the argument arrays
 * are native memory reused call after call (the driver reads them during the call).
 */
final class BatchCopy {
    private static final Logger LOG = LoggerFactory.getLogger(BatchCopy.class);
    /** The 12.8 ABI (with {@code failIdx}); drivers keep serving it after 13.0 changed the signature. */
    private static final int ABI_VERSION = 12080;
    private static final int SRC_ACCESS_ORDER_STREAM = 1;
    private static final int LOCATION_DEVICE = 1;
    private static final int LOCATION_HOST = 2;
    private static final int FLAG_PREFER_OVERLAP_WITH_COMPUTE = 1;
    private static final long ATTRIBUTES_BYTES = 24; // {int srcAccessOrder; {int type, id} src, dst; uint flags}
    private static final MethodHandle MEMCPY_BATCH = find();

    private final int maxCopies;
    private final MemorySegment dsts;
    private final MemorySegment srcs;
    private final MemorySegment sizes;
    private final MemorySegment attributes;
    private final MemorySegment attributeIndex;
    private final MemorySegment failIndex;
    /** The lane's DMA stream, as the driver's handle (JCuda keeps it behind a protected getter: read once, here). */
    private final MemorySegment stream;
    private int count;

    private BatchCopy(Arena arena, int maxCopies, Direction direction, int deviceOrdinal, CUstream stream) {
        this.maxCopies = maxCopies;
        this.stream = MemorySegment.ofAddress(nativePointer(stream));
        dsts = arena.allocate(JAVA_LONG, maxCopies);
        srcs = arena.allocate(JAVA_LONG, maxCopies);
        sizes = arena.allocate(JAVA_LONG, maxCopies);
        attributes = arena.allocate(ATTRIBUTES_BYTES, 8);
        boolean toPool = direction == Direction.TO_POOL;
        attributes.set(JAVA_INT, 0, SRC_ACCESS_ORDER_STREAM);
        attributes.set(JAVA_INT, 4, toPool ? LOCATION_DEVICE : LOCATION_HOST);
        attributes.set(JAVA_INT, 8, toPool ? deviceOrdinal : 0);
        attributes.set(JAVA_INT, 12, toPool ? LOCATION_HOST : LOCATION_DEVICE);
        attributes.set(JAVA_INT, 16, toPool ? 0 : deviceOrdinal);
        attributes.set(JAVA_INT, 20, FLAG_PREFER_OVERLAP_WITH_COMPUTE);
        attributeIndex = arena.allocate(JAVA_LONG); // one attribute set, from copy 0 on
        failIndex = arena.allocate(JAVA_LONG);
    }

    /** A batch for one lane's direction that enqueues on {@code stream}, or null when this driver has no batched copy. */
    static BatchCopy forLane(Arena arena, int maxCopies, Direction direction, int deviceOrdinal, CUstream stream) {
        return MEMCPY_BATCH == null ? null : new BatchCopy(arena, maxCopies, direction, deviceOrdinal, stream);
    }

    private static MethodHandle find() {
        try {
            Linker linker = Linker.nativeLinker();
            SymbolLookup cuda = SymbolLookup.libraryLookup("libcuda.so.1", Arena.global());
            MethodHandle getProcAddress = linker.downcallHandle(cuda.find("cuGetProcAddress_v2").orElseThrow(),
                    FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT, JAVA_LONG, ADDRESS));
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment function = arena.allocate(ADDRESS);
                MemorySegment status = arena.allocate(JAVA_INT);
                int result = (int) getProcAddress.invokeExact(arena.allocateFrom("cuMemcpyBatchAsync"), function, ABI_VERSION, 0L, status);
                if (result != 0 || status.get(JAVA_INT, 0) != 0) {
                    LOG.info("cuMemcpyBatchAsync is not in this driver (CUDA 12.8+): transfers start with the copy kernel");
                    return null;
                }
                return linker.downcallHandle(function.get(ADDRESS, 0), FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS,
                        JAVA_LONG, ADDRESS, ADDRESS, JAVA_LONG, ADDRESS, ADDRESS));
            }
        } catch (Throwable e) { // no libcuda (CI), no native access: the kernel path serves
            LOG.debug("no batched copy: {}", e.toString());
            return null;
        }
    }

    private static long nativePointer(CUstream stream) {
        try {
            Method method = NativePointerObject.class.getDeclaredMethod("getNativePointer");
            method.setAccessible(true);
            return (long) method.invoke(stream);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("JCuda's NativePointerObject has no getNativePointer()", e);
        }
    }

    int maxCopies() {
        return maxCopies;
    }

    void clear() {
        count = 0;
    }

    void add(long dst, long src, long bytes) {
        dsts.setAtIndex(JAVA_LONG, count, dst);
        srcs.setAtIndex(JAVA_LONG, count, src);
        sizes.setAtIndex(JAVA_LONG, count, bytes);
        count++;
    }

    int count() {
        return count;
    }

    /** Enqueues the copies added since {@link #clear} on the lane's DMA stream, in its order. */
    void enqueue() {
        int result;
        try {
            result = (int) MEMCPY_BATCH.invokeExact(dsts, srcs, sizes, (long) count, attributes, attributeIndex, 1L, failIndex, stream);
        } catch (Throwable e) {
            throw new CudaException("cuMemcpyBatchAsync: " + e);
        }
        Cu.check(result, "cuMemcpyBatchAsync(" + count + " copies)");
    }
}
