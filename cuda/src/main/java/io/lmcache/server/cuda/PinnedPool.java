package io.lmcache.server.cuda;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.JCudaDriver;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The L1 pool's regions, page-locked and mapped for the GPUs (portable, device-mapped), one region
 * at a time as the pool prepares them. The copy kernel reads and writes them directly; DMA copies
 * use them at full speed. A region is usable for GPU copies only once it is registered.
 */
public final class PinnedPool implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(PinnedPool.class);
    private static final int FLAGS = 1 /* PORTABLE */ | 2 /* DEVICEMAP */;

    private final CudaDevice registrar;
    private final long regionBytes;
    private final long[] deviceAddress;
    private final CUdeviceptr[] devicePointer;
    private final Pointer[] hostPointer;
    /** Regions are registered by several preparation threads at once (each on its own region). */
    private final AtomicInteger registered = new AtomicInteger();

    public PinnedPool(CudaDevice registrar, int regions, long regionBytes) {
        this.registrar = registrar;
        this.regionBytes = regionBytes;
        this.deviceAddress = new long[regions];
        this.devicePointer = new CUdeviceptr[regions];
        this.hostPointer = new Pointer[regions];
        Arrays.fill(deviceAddress, -1);
    }

    /** Page-locks and maps one region (a pool preparation stage). */
    public void register(int region, MemorySegment slice) {
        registrar.makeCurrent();
        Pointer host = Pointer.to(slice.asByteBuffer());
        Cu.check(JCudaDriver.cuMemHostRegister(host, slice.byteSize(), FLAGS), "cuMemHostRegister(region " + region + ", "
                + (slice.byteSize() >> 20) + " MiB)");
        CUdeviceptr device = new CUdeviceptr();
        Cu.check(JCudaDriver.cuMemHostGetDevicePointer(device, host, 0), "cuMemHostGetDevicePointer(region " + region + ")");
        devicePointer[region] = device;
        hostPointer[region] = host;
        deviceAddress[region] = Cu.address(device);
        registered.incrementAndGet();
    }

    /** Bytes per region; a DMA run never crosses a region, each is registered on its own. */
    public long regionBytes() {
        return regionBytes;
    }

    public int registeredRegions() {
        return registered.get();
    }

    /** The device-visible address of a pool offset (its region must be registered). */
    public long address(long poolOffset) {
        int region = (int) (poolOffset / regionBytes);
        long base = deviceAddress[region];
        if (base < 0) {
            throw new CudaException("pool region " + region + " is not pinned yet");
        }
        return base + (poolOffset - region * regionBytes);
    }

    CUdeviceptr pointer(long poolOffset) {
        int region = (int) (poolOffset / regionBytes);
        return devicePointer[region].withByteOffset(poolOffset - region * regionBytes);
    }

    /** Unpins every region; call before the pool's memory is unmapped. */
    @Override
    public void close() {
        registrar.makeCurrent();
        for (int region = 0; region < hostPointer.length; region++) {
            if (hostPointer[region] != null) {
                int result = JCudaDriver.cuMemHostUnregister(hostPointer[region]);
                if (result != 0) {
                    LOG.warn("cuMemHostUnregister(region {}) returned {}", region, result);
                }
                hostPointer[region] = null;
                deviceAddress[region] = -1;
            }
        }
    }
}
