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
import jcuda.driver.CUdeviceptr;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A worker's VMM (cuMem) allocation imported from its fabric handle and mapped into this process, as LMCache's importer
 * does it ({@code LMCache/LMCache:lmcache/v1/platform/devices/cuda/ipc_wrapper.py@06a0554d}, {@code _import_and_map} and
 * {@code close}; newest-clients.md §1.4, §1.6): {@code cuMemImportFromShareableHandle} (FABRIC), reserve, map, read/write
 * access for this device; released in reverse. JCuda 12.6 takes the fabric handle as a Java array it may copy, so these
 * driver calls go through FFM on {@code libcuda.so.1}, as the batched copy does. The import pins the exporter's physical
 * memory until it is released: release is mandatory on UNREGISTER, reap and re-registration (the tensors' close).
 */
final class VmmImport {
    private static final Logger LOG = LoggerFactory.getLogger(VmmImport.class);
    private static final int HANDLE_TYPE_FABRIC = 0x8;
    private static final int LOCATION_DEVICE = 1;
    private static final int ACCESS_READWRITE = 3;
    private static final Driver DRIVER = Driver.load();

    private final long handle;
    private final long address;
    private final long size;
    private boolean released;

    private VmmImport(long handle, long address, long size) {
        this.handle = handle;
        this.address = address;
        this.size = size;
    }

    /** Whether this process can call the VMM driver entry points (libcuda with them, native access enabled). */
    static boolean available() {
        return DRIVER != null;
    }

    /** Imports and maps a fabric handle's whole chunk on {@code device} (its context current on this thread); unwinds on failure. */
    static VmmImport fabric(CudaDevice device, byte[] fabricHandle, long chunkBytes) {
        if (DRIVER == null) {
            throw new CudaException("VMM import needs cuMemImportFromShareableHandle through FFM, which this JVM or driver lacks");
        }
        device.makeCurrent();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment blob = arena.allocate(64, 8);
            MemorySegment.copy(MemorySegment.ofArray(fabricHandle), 0, blob, 0, 64);
            MemorySegment out = arena.allocate(JAVA_LONG);
            check((int) DRIVER.importHandle.invokeExact(out, blob, HANDLE_TYPE_FABRIC), "cuMemImportFromShareableHandle(FABRIC)");
            long handle = out.get(JAVA_LONG, 0);
            long va = 0;
            boolean mapped = false;
            try {
                check((int) DRIVER.reserve.invokeExact(out, chunkBytes, 0L, 0L, 0L), "cuMemAddressReserve(" + chunkBytes + ")");
                va = out.get(JAVA_LONG, 0);
                check((int) DRIVER.map.invokeExact(va, chunkBytes, 0L, handle, 0L), "cuMemMap");
                mapped = true;
                MemorySegment access = arena.allocate(12, 4); // CUmemAccessDesc {{int type, int id} location; int flags}
                access.set(JAVA_INT, 0, LOCATION_DEVICE);
                access.set(JAVA_INT, 4, device.ordinal());
                access.set(JAVA_INT, 8, ACCESS_READWRITE);
                check((int) DRIVER.setAccess.invokeExact(va, chunkBytes, access, 1L), "cuMemSetAccess");
                return new VmmImport(handle, va, chunkBytes);
            } catch (RuntimeException e) {
                new VmmImport(handle, va, mapped ? chunkBytes : 0).unwind(va != 0, chunkBytes);
                throw e;
            }
        } catch (CudaException e) {
            throw e;
        } catch (Throwable e) {
            throw new CudaException("VMM import: " + e);
        }
    }

    long address() {
        return address;
    }

    CUdeviceptr pointer(long offset) {
        return new CUdeviceptr().withByteOffset(address + offset);
    }

    /** Unmaps, frees the range and releases the handle; logs failures, never throws (called by the release thread). */
    synchronized void release(CudaDevice device) {
        if (released) {
            return;
        }
        released = true;
        device.makeCurrent();
        unwind(true, size);
    }

    private void unwind(boolean reserved, long reservedBytes) {
        try {
            if (size > 0) {
                logFailure((int) DRIVER.unmap.invokeExact(address, size), "cuMemUnmap");
            }
            if (reserved) {
                logFailure((int) DRIVER.addressFree.invokeExact(address, reservedBytes), "cuMemAddressFree");
            }
            logFailure((int) DRIVER.release.invokeExact(handle), "cuMemRelease");
        } catch (Throwable e) {
            LOG.error("VMM release failed: {}", e.toString());
        }
    }

    private static void check(int result, String what) {
        Cu.check(result, what);
    }

    private static void logFailure(int result, String what) {
        int code = result;
        if (code != 0) {
            LOG.error("{} returned CUDA error {} while releasing a VMM import", what, code);
        }
    }

    /** The driver's VMM entry points, or null (no libcuda, as on CI). */
    private record Driver(MethodHandle importHandle, MethodHandle reserve, MethodHandle map, MethodHandle setAccess, MethodHandle unmap,
            MethodHandle addressFree, MethodHandle release) {
        static Driver load() {
            try {
                Linker linker = Linker.nativeLinker();
                SymbolLookup cuda = SymbolLookup.libraryLookup("libcuda.so.1", Arena.global());
                return new Driver(
                        handle(linker, cuda, "cuMemImportFromShareableHandle", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT)),
                        handle(linker, cuda, "cuMemAddressReserve",
                                FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG)),
                        handle(linker, cuda, "cuMemMap", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG)),
                        handle(linker, cuda, "cuMemSetAccess", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, ADDRESS, JAVA_LONG)),
                        handle(linker, cuda, "cuMemUnmap", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG)),
                        handle(linker, cuda, "cuMemAddressFree", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG)),
                        handle(linker, cuda, "cuMemRelease", FunctionDescriptor.of(JAVA_INT, JAVA_LONG)));
            } catch (Throwable e) { // no libcuda (CI), no native access
                LOG.debug("no VMM import: {}", e.toString());
                return null;
            }
        }

        private static MethodHandle handle(Linker linker, SymbolLookup cuda, String name, FunctionDescriptor descriptor) {
            return linker.downcallHandle(cuda.find(name).orElseThrow(), descriptor);
        }
    }
}
