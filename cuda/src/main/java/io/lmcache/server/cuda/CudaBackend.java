package io.lmcache.server.cuda;

import io.lmcache.server.config.Tuning;
import io.lmcache.server.protocol.TensorWrapper;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.Map;
import java.util.function.ToLongFunction;

/**
 * The real CUDA backend: the devices, opening a worker's tensors, each device's copy engine, the
 * pinned pool and the event poller. Exists only when a driver and a GPU were found.
 */
public final class CudaBackend implements GpuBackend {
    private final CudaDevices devices;
    private final EventPoller poller = new EventPoller();
    private final Tuning tuning;
    private PinnedPool pinned;

    CudaBackend(CudaDevices devices, Tuning tuning) {
        this.devices = devices;
        this.tuning = tuning;
    }

    @Override
    public boolean available() {
        return true;
    }

    @Override
    public String describe() {
        return devices.describe();
    }

    public CudaDevices devices() {
        return devices;
    }

    /** Pins the pool's regions as they are prepared, through the first GPU's context (portable to every GPU). */
    @Override
    public synchronized PinnedPool pinnedPool(int regions, long regionBytes) {
        if (pinned == null) {
            pinned = new PinnedPool(devices.devices().getFirst(), regions, regionBytes);
        }
        return pinned;
    }

    @Override
    public void pin(int region, MemorySegment slice) {
        pinned.register(region, slice);
    }

    @Override
    public DeviceTensors open(List<TensorWrapper> wrappers, Executor release) {
        return DeviceTensors.open(devices, wrappers, release);
    }

    @Override
    public CopyEngine engine(CudaDevice device) {
        return device.engine(poller, pinned, tuning);
    }

    /** The device's complete event, made once (its primary context only: no copy engine is created for a failure). */
    @Override
    public byte[] failureEvent(String deviceUuid) {
        return deviceFor(deviceUuid).completedEvent();
    }

    /** The GPU with this UUID, or the first GPU when it is null or unknown. */
    private CudaDevice deviceFor(String deviceUuid) {
        if (deviceUuid != null) {
            String uuid = CudaDevices.normalizeUuid(deviceUuid);
            for (CudaDevice device : devices.devices()) {
                if (device.uuid().equals(uuid)) {
                    return device;
                }
            }
        }
        return devices.devices().getFirst();
    }

    /** GPU time of the completed transfers in one direction, over every device. */
    @Override
    public long copyNanos(Direction direction) {
        return sumOverEngines(engine -> engine.gpuNanos(direction));
    }

    /** Bytes of the completed transfers in one direction, over every device. */
    @Override
    public long copyBytes(Direction direction) {
        return sumOverEngines(engine -> engine.copiedBytes(direction));
    }

    /** Over the devices whose copy engine exists (reading counters creates none). */
    private long sumOverEngines(ToLongFunction<CopyEngine> counter) {
        long total = 0;
        for (CudaDevice device : devices.devices()) {
            CopyEngine engine = device.existingEngine();
            total += engine == null ? 0 : counter.applyAsLong(engine);
        }
        return total;
    }

    @Override
    public void resetCopyCounters() {
        for (CudaDevice device : devices.devices()) {
            CopyEngine engine = device.existingEngine();
            if (engine != null) {
                engine.resetCounters();
            }
        }
    }

    /** What /status shows of CUDA. */
    @Override
    public Map<String, Object> status() {
        Map<String, Object> status = new LinkedHashMap<>();
        List<Map<String, Object>> list = new ArrayList<>();
        int mappings = 0;
        for (CudaDevice device : devices.devices()) {
            int open = device.ipc().openMappings();
            mappings += open;
            list.add(Map.of("ordinal", device.ordinal(), "name", device.name(), "uuid", device.uuid(), "open_ipc_mappings", open));
        }
        status.put("devices", list);
        status.put("open_ipc_mappings", mappings);
        status.put("pinned_regions", pinned == null ? 0 : pinned.registeredRegions());
        status.put("transfers_in_flight", poller.pendingCount());
        status.put("copy_kernel_blocks", tuning.copyKernelBlocks());
        status.put("staging_bytes_per_device", 4 * tuning.stagingHalfBytes());
        status.put("store_gpu_seconds", copyNanos(Direction.TO_POOL) / 1e9);
        status.put("retrieve_gpu_seconds", copyNanos(Direction.FROM_POOL) / 1e9);
        List<SubmitTimes> times = new ArrayList<>();
        for (CudaDevice device : devices.devices()) {
            CopyEngine engine = device.existingEngine();
            if (engine != null) {
                times.add(engine.submitTimes());
            }
        }
        status.put("submit_cpu", SubmitTimes.status(times));
        return status;
    }

    @Override
    public EventPoller eventPoller() {
        return poller;
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
