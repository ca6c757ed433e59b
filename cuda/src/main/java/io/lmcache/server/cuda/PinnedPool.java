package io.lmcache.server.cuda;

import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.Locale;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.JCudaDriver;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The L1 pool's regions, page-locked and mapped for the GPUs (portable, device-mapped), one region at a time. The copy
 * kernel reads and writes them directly; DMA copies use them at full speed. Nothing is pinned before the first GPU worker
 * registers (pinning needs a context, and a context holds device memory): {@link PinSchedule} says when, this class how,
 * through the context of the GPU that registered first ({@code CU_MEMHOSTREGISTER_PORTABLE}: every other GPU's context,
 * made later, sees the pages as pinned too; with unified addressing the device pointer is the same in each). A region
 * is usable for GPU copies only once it is pinned; {@link #address} pins one a transfer meets first.
 */
public final class PinnedPool implements PoolMemory, AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(PinnedPool.class);
    private static final int FLAGS = 1 /* PORTABLE */ | 2 /* DEVICEMAP */;

    private final long regionBytes;
    private final AtomicLongArray deviceAddress;
    private final AtomicReferenceArray<CUdeviceptr> devicePointer;
    private final AtomicReferenceArray<Pointer> hostPointer;
    private final PinSchedule schedule;
    /** The GPU whose context pins (the first to register); null before. */
    private volatile CudaDevice registrar;

    public PinnedPool(int regions, long regionBytes) {
        this.regionBytes = regionBytes;
        this.deviceAddress = new AtomicLongArray(regions);
        this.devicePointer = new AtomicReferenceArray<>(regions);
        this.hostPointer = new AtomicReferenceArray<>(regions);
        for (int i = 0; i < regions; i++) {
            deviceAddress.set(i, -1);
        }
        // pinning of different regions runs in parallel in the driver (see the pool preparation's threads)
        this.schedule = new PinSchedule(regions, Math.clamp(Runtime.getRuntime().availableProcessors() / 2, 1, 8));
    }

    /** A region the pool preparation has ready (a preparation stage): pinned now once a GPU has registered, else later. */
    public void register(int region, MemorySegment slice) {
        schedule.prepared(region, slice);
    }

    /** Starts pinning through this GPU's context if no GPU registered before (a REGISTER on it; its context exists). */
    void startPinning(CudaDevice first) {
        synchronized (this) {
            if (registrar != null) {
                return;
            }
            registrar = first;
        }
        if (schedule.start(this::pin)) {
            LOG.info("pinning the L1 pool through GPU {}'s context (the first GPU a worker registered on)", first.ordinal());
        }
    }

    private void pin(int region, MemorySegment slice) {
        registrar.makeCurrent();
        Pointer host = Pointer.to(slice.asByteBuffer());
        Cu.check(JCudaDriver.cuMemHostRegister(host, slice.byteSize(), FLAGS), "cuMemHostRegister(region " + region + ", "
                + (slice.byteSize() >> 20) + " MiB)");
        CUdeviceptr device = new CUdeviceptr();
        int result = JCudaDriver.cuMemHostGetDevicePointer(device, host, 0);
        if (result != 0) {
            JCudaDriver.cuMemHostUnregister(host);
            Cu.check(result, "cuMemHostGetDevicePointer(region " + region + ")");
        }
        devicePointer.set(region, device);
        hostPointer.set(region, host);
        deviceAddress.set(region, Cu.address(device));
    }

    /** Bytes per region; a DMA run never crosses a region, each is registered on its own. */
    @Override
    public long regionBytes() {
        return regionBytes;
    }

    public int registeredRegions() {
        return schedule.pinnedRegions();
    }

    /** The device-visible address of a pool offset, pinning its region first if no one has yet. */
    @Override
    public long address(long poolOffset) {
        int region = (int) (poolOffset / regionBytes);
        long base = deviceAddress.get(region);
        if (base < 0) {
            schedule.ensure(region);
            base = deviceAddress.get(region);
        }
        return base + (poolOffset - region * regionBytes);
    }

    @Override
    public CUdeviceptr pointer(long poolOffset) {
        int region = (int) (poolOffset / regionBytes);
        CUdeviceptr base = devicePointer.get(region);
        if (base == null) {
            schedule.ensure(region);
            base = devicePointer.get(region);
        }
        return base.withByteOffset(poolOffset - region * regionBytes);
    }

    /**
     * Pins this region now on the calling thread unless it is pinned already (waiting for a sweep that is pinning it): what the
     * GPU warm-up does for the regions the first STOREs will allocate from, so they do not wait for it (issue 30). Throws
     * {@link CudaException} when pinning has not started (no GPU registration yet) or the driver refused the region.
     */
    public void pinNow(int region) {
        schedule.ensure(region);
    }

    public boolean isPinned(int region) {
        return schedule.isPinned(region);
    }

    /**
     * Waits for the background pinning of the regions prepared by the first registration, until {@code deadlineNs} at the
     * latest ({@link PinSchedule#awaitSwept}).
     */
    public boolean awaitSwept(long deadlineNs) {
        return schedule.awaitSwept(deadlineNs);
    }

    public int regions() {
        return schedule.regions();
    }

    /** What /status shows of the pinning. */
    public Map<String, Object> status() {
        Map<String, Object> status = new LinkedHashMap<>();
        CudaDevice through = registrar;
        status.put("state", schedule.state().name().toLowerCase(Locale.ROOT));
        status.put("through_gpu", through == null ? -1 : through.ordinal());
        status.put("regions_pinned", schedule.pinnedRegions());
        status.put("regions_total", schedule.regions());
        status.put("error", schedule.error());
        return status;
    }

    /** Unpins every region; call before the pool's memory is unmapped. */
    @Override
    public void close() {
        schedule.stop();
        CudaDevice through = registrar;
        if (through == null) {
            return; // nothing was ever pinned
        }
        through.makeCurrent();
        for (int region = 0; region < hostPointer.length(); region++) {
            Pointer host = hostPointer.getAndSet(region, null);
            if (host != null) {
                int result = JCudaDriver.cuMemHostUnregister(host);
                if (result != 0) {
                    LOG.warn("cuMemHostUnregister(region {}) returned {}", region, result);
                }
                deviceAddress.set(region, -1);
            }
        }
    }
}
