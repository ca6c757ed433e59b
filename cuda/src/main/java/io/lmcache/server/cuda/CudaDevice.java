package io.lmcache.server.cuda;

import io.lmcache.server.config.Tuning;
import java.util.LinkedHashMap;
import java.util.Map;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUipcEventHandle;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.CUlimit;
import jcuda.driver.JCudaDriver;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One GPU: its primary context, its IPC mappings, its copy engine and the complete event that failure
 * replies carry. The context is retained at the first use that needs one, which is a worker's REGISTER
 * of tensors on this GPU (opening their IPC handles): before that the server holds no device memory on
 * the GPU at all (LMCache's server pinned its pool through a context on cuda:0 at start, ~616 MiB on a GPU
 * no worker may ever use: LMCache issue #4019). Listing the devices ({@code cuInit}, names, UUIDs, PCI bus
 * ids) needs no context.
 */
public final class CudaDevice {
    private static final Logger LOG = LoggerFactory.getLogger(CudaDevice.class);
    /**
     * When positive, the context's per-thread stack limit, set right after it is created ({@code CU_LIMIT_STACK_SIZE}; the
     * copy kernel uses no local memory: its PTX has no {@code .local}), so the driver's local-memory reservation (stack size x
     * resident threads) is smaller. 0 leaves the driver's default ({@code -Dlmcache.cuda.stackLimitBytes}, config's Tuning;
     * the GPU check measures both: testclient/gpu/device_memory_check.py).
     */
    private final long stackLimitBytes;

    private final int ordinal;
    private final CUdevice device;
    private final String uuid;
    private final String name;
    private final String pciBusId;
    private CUcontext context;
    /** When the context was retained (wall clock, ms), and the GPU's free and total bytes right after; -1 before. */
    private volatile long contextCreatedMs = -1;
    private volatile long gpuFreeAfterContextBytes = -1;
    private volatile long gpuTotalBytes = -1;
    private IpcMemory ipc;
    private TimelineSemaphores semaphores;
    private CopyEngine engine;
    private CUevent completed;
    /** Read without the lock: a failure reply never waits behind an engine being created. */
    private volatile byte[] completedHandle;

    CudaDevice(int ordinal, CUdevice device, DeviceNames names, long stackLimitBytes) {
        this.ordinal = ordinal;
        this.device = device;
        this.uuid = names.uuid();
        this.name = names.name();
        this.pciBusId = names.pciBusId();
        this.stackLimitBytes = stackLimitBytes;
    }

    public int ordinal() {
        return ordinal;
    }

    public String uuid() {
        return uuid;
    }

    public String name() {
        return name;
    }

    /** The PCI bus id as sysfs names the device ({@code 0000:18:00.0}, lowercase), or "" when the driver did not say. */
    public String pciBusId() {
        return pciBusId;
    }

    /**
     * Makes this device's primary context current on the calling thread, retaining it first when this is its first use
     * (a REGISTER on this GPU; see the class comment): the complete event failure replies carry is made with it, so no
     * failure reply on a GPU with a context makes a driver call.
     */
    public synchronized void makeCurrent() {
        if (context == null) {
            retainContext();
        }
        Cu.check(JCudaDriver.cuCtxSetCurrent(context), "cuCtxSetCurrent(" + ordinal + ")");
    }

    private void retainContext() {
        CUcontext primary = new CUcontext();
        Cu.check(JCudaDriver.cuDevicePrimaryCtxRetain(primary, device), "cuDevicePrimaryCtxRetain(" + ordinal + ")");
        context = primary;
        Cu.check(JCudaDriver.cuCtxSetCurrent(context), "cuCtxSetCurrent(" + ordinal + ")");
        if (stackLimitBytes > 0) {
            int result = JCudaDriver.cuCtxSetLimit(CUlimit.CU_LIMIT_STACK_SIZE, stackLimitBytes);
            if (result != 0) {
                LOG.warn("GPU {}: cuCtxSetLimit(CU_LIMIT_STACK_SIZE, {}) returned {}; the driver's default stays", ordinal,
                        stackLimitBytes, result);
            }
        }
        long[] free = new long[1];
        long[] total = new long[1];
        if (JCudaDriver.cuMemGetInfo(free, total) == 0) {
            gpuFreeAfterContextBytes = free[0];
            gpuTotalBytes = total[0];
        }
        contextCreatedMs = System.currentTimeMillis();
        LOG.info("CUDA context created on GPU {} ({}) at its first registration; the GPU has {} MiB free of {} MiB", ordinal, uuid,
                gpuFreeAfterContextBytes >> 20, gpuTotalBytes >> 20);
        makeCompletedEvent();
    }

    /** Whether this process has retained the GPU's context (the only way it can hold device memory there). */
    public boolean hasContext() {
        return contextCreatedMs >= 0;
    }

    /**
     * Whether the driver reports this GPU's primary context active in this process ({@code cuDevicePrimaryCtxGetState},
     * which needs no context): the check that nothing else (a library, a stray call) created one behind our back.
     */
    public boolean driverReportsContextActive() {
        int[] flags = new int[1];
        int[] active = new int[1];
        return JCudaDriver.cuDevicePrimaryCtxGetState(device, flags, active) == 0 && active[0] != 0;
    }

    /**
     * The device memory the server holds on this GPU, as it accounts it: what it allocated itself (the copy engine's
     * staging; streams, events and the one small kernel module are not counted), and the GPU's free and total bytes read
     * right after the context was made ({@code cuMemGetInfo} sees the whole GPU, not this process, so that is context;
     * the context's own footprint is not visible through the driver API: the GPU check reads it per process from
     * nvidia-smi). Without a context the process holds no device memory on the GPU, so every figure is exact then: 0.
     * {@code driver_context_active} asks the driver ({@code cuDevicePrimaryCtxGetState}: one cheap call, no context).
     */
    public Map<String, Object> memoryStatus() {
        Map<String, Object> status = new LinkedHashMap<>();
        status.put("ordinal", ordinal);
        status.put("uuid", uuid);
        status.put("pci_bus_id", pciBusId);
        status.put("context", hasContext());
        status.put("driver_context_active", driverReportsContextActive());
        CopyEngine engine = existingEngine();
        status.put("allocated_bytes", engine == null ? 0L : engine.deviceBytes());
        status.put("context_created_ms", contextCreatedMs);
        status.put("gpu_free_bytes_after_context", gpuFreeAfterContextBytes);
        status.put("gpu_total_bytes", gpuTotalBytes);
        return status;
    }

    public synchronized IpcMemory ipc() {
        if (ipc == null) {
            ipc = new IpcMemory(this);
        }
        return ipc;
    }

    /**
     * Isolated IPC's semaphore buffer on this GPU, made at the first registration or transfer that needs it (never during
     * a transfer of a worker that registered with isolated-IPC wrappers: see {@link DeviceTensors#open}).
     */
    public synchronized TimelineSemaphores semaphores() {
        if (semaphores == null) {
            semaphores = new TimelineSemaphores(this);
        }
        return semaphores;
    }

    /** The copy engine, created on first use (streams, kernel module, staging): at a REGISTER on this GPU. */
    public synchronized CopyEngine engine(EventPoller poller, PinnedPool pool, Tuning tuning) {
        if (engine == null) {
            makeCurrent();
            engine = new CopyEngine(this, poller, pool, tuning);
        }
        return engine;
    }

    /**
     * The handle of an interprocess event on this GPU that was recorded once, has completed and is
     * never recorded again (so it stays complete), made with the context and kept until close: what a
     * STORE or RETRIEVE that copied nothing answers with (protocol doc §9: even a failure carries a valid, recorded event). One handle serves every such reply:
     * each open by a worker ({@code cudaIpcOpenEventHandle}, torch's {@code Event.from_ipc_handle})
     * makes that worker its own imported event, and waiting on or querying a complete event returns at
     * once. Needs only the primary context, not the copy engine (whose staging memory a failure should
     * not allocate).
     */
    public byte[] completedEvent() {
        byte[] handle = completedHandle;
        return (handle != null ? handle : makeCompletedEvent()).clone();
    }

    /** The complete event's handle if this GPU has a context (it is made with it), else null; never a driver call. */
    byte[] existingCompletedEvent() {
        byte[] handle = completedHandle;
        return handle == null ? null : handle.clone();
    }

    private synchronized byte[] makeCompletedEvent() {
        if (completedHandle == null) {
            makeCurrent();
            CUevent event = new CUevent();
            Cu.check(JCudaDriver.cuEventCreate(event, CUevent_flags.CU_EVENT_INTERPROCESS | CUevent_flags.CU_EVENT_DISABLE_TIMING),
                    "cuEventCreate(completed)");
            CUstream stream = new CUstream();
            try {
                Cu.check(JCudaDriver.cuStreamCreate(stream, CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate(completed)");
                try {
                    // recorded on a stream of its own with nothing on it: complete as soon as recorded
                    Cu.check(JCudaDriver.cuEventRecord(event, stream), "cuEventRecord(completed)");
                    Cu.check(JCudaDriver.cuEventSynchronize(event), "cuEventSynchronize(completed)");
                } finally {
                    JCudaDriver.cuStreamDestroy(stream);
                }
                CUipcEventHandle handle = new CUipcEventHandle();
                Cu.check(JCudaDriver.cuIpcGetEventHandle(handle, event), "cuIpcGetEventHandle(completed)");
                completedHandle = Cu.bytes(handle);
                completed = event;
            } catch (RuntimeException e) {
                JCudaDriver.cuEventDestroy(event);
                throw e;
            }
        }
        return completedHandle;
    }

    /** The copy engine if a transfer ever created it, else null (for counters: reading them creates nothing). */
    synchronized CopyEngine existingEngine() {
        return engine;
    }

    synchronized void close() {
        if (engine != null) {
            engine.close();
        }
        if (completed != null) {
            JCudaDriver.cuCtxSetCurrent(context);
            JCudaDriver.cuEventDestroy(completed);
            completed = null;
            completedHandle = null;
        }
        if (context != null) {
            JCudaDriver.cuDevicePrimaryCtxRelease(device);
            context = null;
            contextCreatedMs = -1;
        }
    }

    /** What the driver calls a GPU, read without a context. */
    record DeviceNames(String uuid, String name, String pciBusId) {
    }
}
