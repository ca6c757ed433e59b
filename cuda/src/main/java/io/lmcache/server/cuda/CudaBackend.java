package io.lmcache.server.cuda;

import io.lmcache.server.config.Tuning;
import io.lmcache.server.protocol.TensorWrapper;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.ToLongFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The real CUDA backend: the devices, opening a worker's tensors, each device's copy engine, the
 * pinned pool and the event poller. Exists only when a driver and a GPU were found.
 */
public final class CudaBackend implements GpuBackend {
    private static final Logger LOG = LoggerFactory.getLogger(CudaBackend.class);
    private final CudaDevices devices;
    private final EventPoller poller;
    private final Tuning tuning;
    private volatile PinnedPool pinned;
    /** Contexts made for a failure reply's event because no GPU had one yet (no GPU worker had registered): 0 or 1. */
    private final LongAdder failuresWithoutContext = new LongAdder();

    /** {@code eventsWake}: wakes the event poller's thread when a transfer is tracked (see {@link EventPoller}). */
    CudaBackend(CudaDevices devices, Tuning tuning, Runnable eventsWake) {
        this.poller = new EventPoller(eventsWake);
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

    @Override
    public List<String> pciBusIds() {
        return devices.devices().stream().map(CudaDevice::pciBusId).toList();
    }

    public CudaDevices devices() {
        return devices;
    }

    /**
     * The pool's pinning: regions are recorded as they are prepared and pinned from the first GPU registration on, through
     * that GPU's context (portable to every GPU; see {@link PinnedPool}). Makes no context.
     */
    @Override
    public synchronized PinnedPool pinnedPool(int regions, long regionBytes) {
        if (pinned == null) {
            pinned = new PinnedPool(regions, regionBytes);
        }
        return pinned;
    }

    @Override
    public void pin(int region, MemorySegment slice) {
        pinned.register(region, slice);
    }

    @Override
    public void pinNow(int region) {
        PinnedPool pool = pinned;
        if (pool == null) {
            throw new CudaException("the pool is not pinned (no pinned pool)");
        }
        pool.pinNow(region);
    }

    @Override
    public boolean awaitPoolPinned(long deadlineNs) {
        PinnedPool pool = pinned;
        return pool == null || pool.awaitSwept(deadlineNs);
    }

    @Override
    public DeviceTensors open(List<TensorWrapper> wrappers, Executor release) {
        return DeviceTensors.open(devices, wrappers, release);
    }

    /** The device's copy engine (made at a REGISTER on it); the first one also starts the pool's pinning through its context. */
    @Override
    public CopyEngine engine(CudaDevice device) {
        CopyEngine engine = device.engine(poller, pinned, tuning);
        PinnedPool pool = pinned;
        if (pool != null) {
            pool.startPinning(device);
        }
        return engine;
    }

    /**
     * The complete event of the GPU with this UUID if it has a context, else of any GPU that has one (made with each
     * context, so this makes no driver call and no context). When no GPU has a context yet (no GPU worker registered), the
     * first GPU's context and event are made now, once, and counted: a GPU worker that never registered (a server running
     * {@code --supported-transfer-mode engine_driven}, a misconfigured engine) still gets an event it can open, as 64 zero
     * bytes would make its {@code Event.from_ipc_handle} raise and take vLLM down (issue 13). That costs a context on
     * the first GPU (what LMCache holds from the start, its issue #4019), but only after such a request, never at start.
     */
    @Override
    public byte[] failureEvent(String deviceUuid) {
        byte[] handle = deviceFor(deviceUuid).existingCompletedEvent();
        for (int i = 0; handle == null && i < devices.devices().size(); i++) {
            handle = devices.devices().get(i).existingCompletedEvent();
        }
        if (handle != null) {
            return handle;
        }
        CudaDevice first = devices.devices().getFirst();
        synchronized (failuresWithoutContext) {
            if (first.existingCompletedEvent() == null) {
                failuresWithoutContext.increment();
                LOG.warn("a STORE/RETRIEVE failure before any GPU registration: making GPU {}'s context for its reply's event (a GPU"
                        + " worker must be able to open it); the server now holds device memory on that GPU", first.ordinal());
            }
        }
        return first.completedEvent();
    }

    @Override
    public byte[] completeTimelineEvent(String deviceUuid) {
        CudaDevice device = deviceFor(deviceUuid);
        for (int i = 0; !device.hasContext() && i < devices.devices().size(); i++) {
            device = devices.devices().get(i).hasContext() ? devices.devices().get(i) : device;
        }
        return device.semaphores().complete();
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
        status.put("device_memory", deviceMemory());
        status.put("open_ipc_mappings", mappings);
        PinnedPool pool = pinned;
        status.put("pinned_regions", pool == null ? 0 : pool.registeredRegions());
        status.put("pool_pinning", pool == null ? Map.of() : pool.status());
        status.put("contexts_made_for_failure_replies", failuresWithoutContext.sum());
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

    /**
     * Per GPU, the device memory this server holds there (see {@link CudaDevice#memoryStatus}): 0 and no context on a GPU
     * no worker has registered on. Reading it makes one cheap driver call per GPU (the primary context's state), no context.
     */
    private List<Map<String, Object>> deviceMemory() {
        List<Map<String, Object>> list = new ArrayList<>();
        for (CudaDevice device : devices.devices()) {
            list.add(device.memoryStatus());
        }
        return list;
    }

    @Override
    public EventPoller eventPoller() {
        return poller;
    }

    /** Waits for transfers in flight, unpins the pool (before its memory goes), releases the contexts. */
    @Override
    public void close() {
        poller.close();
        PinnedPool pool = pinned;
        if (pool != null) {
            pool.close();
        }
        devices.close();
    }
}
