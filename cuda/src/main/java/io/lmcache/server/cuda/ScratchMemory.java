package io.lmcache.server.cuda;

import java.lang.foreign.MemorySegment;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.JCudaDriver;

/**
 * The GPU warm-up's own memory on one device (issue 30): a few MiB of device memory ({@code cuMemAlloc}) that stands in for
 * a worker's KV blocks, and a few MiB of pinned, device-mapped host memory ({@code cuMemHostAlloc}) that stands in for the L1
 * pool, both allocated in this server's context and freed by {@link #close}. Nothing here is a worker's IPC-opened memory or
 * the pool: the warm-up's copies write only these bytes. Close only once no transfer on this memory is in flight (the
 * warm-up waits for every one's completion first, and keeps the memory when one never completes).
 */
public final class ScratchMemory implements PoolMemory, AutoCloseable {
    private static final int HOST_FLAGS = 1 /* PORTABLE */ | 2 /* DEVICEMAP */;

    private final CudaDevice device;
    private final long hostBytes;
    private final long deviceBytes;
    private final long regionBytes;
    private final Pointer host = new Pointer();
    private final CUdeviceptr hostMapped = new CUdeviceptr();
    private final CUdeviceptr blocks = new CUdeviceptr();
    private long hostMappedAddress;
    private boolean hostAllocated;
    private boolean deviceAllocated;

    private ScratchMemory(CudaDevice device, long hostBytes, long deviceBytes, long regionBytes) {
        this.device = device;
        this.hostBytes = hostBytes;
        this.deviceBytes = deviceBytes;
        this.regionBytes = regionBytes;
    }

    /**
     * Allocates {@code hostBytes} of pinned host memory (cut into regions of {@code regionBytes}, as the pool is) and
     * {@code deviceBytes} on {@code device}, through its context (made current on this thread); frees what it got and throws
     * {@link CudaException} when the driver refuses either.
     */
    public static ScratchMemory allocate(CudaDevice device, long hostBytes, long deviceBytes, long regionBytes) {
        ScratchMemory memory = new ScratchMemory(device, hostBytes, deviceBytes, regionBytes);
        try {
            device.makeCurrent();
            Cu.check(JCudaDriver.cuMemHostAlloc(memory.host, hostBytes, HOST_FLAGS), "cuMemHostAlloc(warm-up scratch, "
                    + (hostBytes >> 10) + " KiB)");
            memory.hostAllocated = true;
            Cu.check(JCudaDriver.cuMemHostGetDevicePointer(memory.hostMapped, memory.host, 0), "cuMemHostGetDevicePointer(warm-up scratch)");
            memory.hostMappedAddress = Cu.address(memory.hostMapped);
            Cu.check(JCudaDriver.cuMemAlloc(memory.blocks, deviceBytes), "cuMemAlloc(warm-up scratch, " + (deviceBytes >> 10) + " KiB)");
            memory.deviceAllocated = true;
        } catch (RuntimeException e) {
            memory.close();
            throw e;
        }
        return memory;
    }

    /** The pinned host memory, as the scratch store's pool. */
    public MemorySegment hostSegment() {
        return MemorySegment.ofBuffer(host.getByteBuffer(0, hostBytes));
    }

    public long hostBytes() {
        return hostBytes;
    }

    public long deviceBytes() {
        return deviceBytes;
    }

    public CudaDevice device() {
        return device;
    }

    /** {@code count} KV tensors that all start at the scratch device memory (a warm-up needs no more than one tensor's bytes). */
    public DeviceTensors tensors(int count) {
        return DeviceTensors.scratch(device, blocks, count);
    }

    @Override
    public long address(long poolOffset) {
        return hostMappedAddress + poolOffset;
    }

    @Override
    public CUdeviceptr pointer(long poolOffset) {
        return hostMapped.withByteOffset(poolOffset);
    }

    @Override
    public long regionBytes() {
        return regionBytes;
    }

    /** Frees both allocations through the device's context; only once no copy on them is in flight. */
    @Override
    public synchronized void close() {
        if (!hostAllocated && !deviceAllocated) {
            return;
        }
        device.makeCurrent();
        if (deviceAllocated) {
            deviceAllocated = false;
            Cu.check(JCudaDriver.cuMemFree(blocks), "cuMemFree(warm-up scratch)");
        }
        if (hostAllocated) {
            hostAllocated = false;
            Cu.check(JCudaDriver.cuMemFreeHost(host), "cuMemFreeHost(warm-up scratch)");
        }
    }
}
