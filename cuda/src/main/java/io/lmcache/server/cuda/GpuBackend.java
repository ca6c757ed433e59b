package io.lmcache.server.cuda;

import io.lmcache.server.protocol.TensorWrapper;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * Everything the server needs from CUDA, in one place: the devices, opening a worker's tensors,
 * each device's copy engine, the pinned pool and the event poller. Exists only when a driver and
 * a GPU were found; without it the server serves CPU workers over shared memory.
 */
public final class GpuBackend implements AutoCloseable {
    private final CudaDevices devices;
    private final EventPoller poller = new EventPoller();
    private PinnedPool pinned;

    private GpuBackend(CudaDevices devices) {
        this.devices = devices;
    }

    /** Opens the driver; throws {@link CudaException} (with the reason) when there is no usable GPU. */
    public static GpuBackend open() {
        return new GpuBackend(CudaDevices.open());
    }

    public String describe() {
        return devices.describe();
    }

    public CudaDevices devices() {
        return devices;
    }

    /** Pins the pool's regions as they are prepared, through the first GPU's context (portable to every GPU). */
    public synchronized PinnedPool pinnedPool(int regions, long regionBytes) {
        if (pinned == null) {
            pinned = new PinnedPool(devices.devices().getFirst(), regions, regionBytes);
        }
        return pinned;
    }

    public void pin(int region, MemorySegment slice) {
        pinned.register(region, slice);
    }

    public DeviceTensors open(List<TensorWrapper> wrappers) {
        return DeviceTensors.open(devices, wrappers);
    }

    public CopyEngine engine(CudaDevice device) {
        return device.engine(poller, pinned);
    }

    /** The engine of the GPU with this UUID, or of the first GPU when it is unknown (failure replies only). */
    public CopyEngine engineFor(String deviceUuid) {
        for (CudaDevice device : devices.devices()) {
            if (deviceUuid != null && device.uuid().equals(CudaDevices.normalizeUuid(deviceUuid))) {
                return engine(device);
            }
        }
        return engine(devices.devices().getFirst());
    }

    /** The transfers' event poller: the server runs its {@code doWork()} on lmcache-cuda-events. */
    public EventPoller eventPoller() {
        return poller;
    }

    public int pendingTransfers() {
        return poller.pendingCount();
    }

    /** GPU time of the completed transfers in one direction, over every device. */
    public long copyNanos(Direction direction) {
        return sumOverEngines(engine -> engine.gpuNanos(direction));
    }

    /** Bytes of the completed transfers in one direction, over every device. */
    public long copyBytes(Direction direction) {
        return sumOverEngines(engine -> engine.copiedBytes(direction));
    }

    /** Over the devices whose copy engine exists (reading counters creates none). */
    private long sumOverEngines(java.util.function.ToLongFunction<CopyEngine> counter) {
        long total = 0;
        for (CudaDevice device : devices.devices()) {
            CopyEngine engine = device.existingEngine();
            total += engine == null ? 0 : counter.applyAsLong(engine);
        }
        return total;
    }

    public void resetCopyCounters() {
        for (CudaDevice device : devices.devices()) {
            CopyEngine engine = device.existingEngine();
            if (engine != null) {
                engine.resetCounters();
            }
        }
    }

    /** What /status shows of CUDA. */
    public java.util.Map<String, Object> status() {
        java.util.Map<String, Object> status = new java.util.LinkedHashMap<>();
        java.util.List<java.util.Map<String, Object>> list = new java.util.ArrayList<>();
        int mappings = 0;
        for (CudaDevice device : devices.devices()) {
            int open = device.ipc().openMappings();
            mappings += open;
            list.add(java.util.Map.of("ordinal", device.ordinal(), "name", device.name(), "uuid", device.uuid(), "open_ipc_mappings", open));
        }
        status.put("devices", list);
        status.put("open_ipc_mappings", mappings);
        status.put("pinned_regions", pinned == null ? 0 : pinned.registeredRegions());
        status.put("transfers_in_flight", poller.pendingCount());
        status.put("copy_kernel_blocks", CopyEngine.KERNEL_BLOCKS);
        status.put("staging_bytes_per_device", 4 * CopyEngine.STAGING_HALF_BYTES);
        status.put("store_gpu_seconds", copyNanos(Direction.TO_POOL) / 1e9);
        status.put("retrieve_gpu_seconds", copyNanos(Direction.FROM_POOL) / 1e9);
        return status;
    }

    /** Waits for transfers in flight, unpins the pool (before its memory goes), releases the contexts. */
    @Override
    public void close() {
        poller.close();
        if (pinned != null) {
            pinned.close();
        }
        devices.close();
    }
}
