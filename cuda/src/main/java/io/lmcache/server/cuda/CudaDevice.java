package io.lmcache.server.cuda;

import io.lmcache.server.config.Tuning;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUipcEventHandle;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;

/**
 * One GPU: its primary context (retained on first use, so a host whose workers never use a GPU
 * creates no context on it), its IPC mappings, its copy engine and the complete event that failure
 * replies carry.
 */
public final class CudaDevice {
    private final int ordinal;
    private final CUdevice device;
    private final String uuid;
    private final String name;
    private CUcontext context;
    private IpcMemory ipc;
    private CopyEngine engine;
    private CUevent completed;
    /** Read without the lock: a failure reply never waits behind an engine being created. */
    private volatile byte[] completedHandle;

    CudaDevice(int ordinal, CUdevice device, String uuid, String name) {
        this.ordinal = ordinal;
        this.device = device;
        this.uuid = uuid;
        this.name = name;
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

    /** Makes this device's primary context current on the calling thread. */
    public synchronized void makeCurrent() {
        if (context == null) {
            CUcontext primary = new CUcontext();
            Cu.check(JCudaDriver.cuDevicePrimaryCtxRetain(primary, device), "cuDevicePrimaryCtxRetain(" + ordinal + ")");
            context = primary;
        }
        Cu.check(JCudaDriver.cuCtxSetCurrent(context), "cuCtxSetCurrent(" + ordinal + ")");
    }

    public synchronized IpcMemory ipc() {
        if (ipc == null) {
            ipc = new IpcMemory(this);
        }
        return ipc;
    }

    /** The copy engine, created on first use (streams, kernel module). */
    public synchronized CopyEngine engine(EventPoller poller, PinnedPool pool, Tuning tuning) {
        if (engine == null) {
            makeCurrent();
            engine = new CopyEngine(this, poller, pool, tuning);
        }
        return engine;
    }

    /**
     * The handle of an interprocess event on this GPU that was recorded once, has completed and is
     * never recorded again (so it stays complete), made on first use (the first GPU's when the backend
     * opens) and kept until close: what a STORE or RETRIEVE that copied nothing answers with (protocol
     * doc §9: even a failure carries a valid, recorded event). One handle serves every such reply:
     * each open by a worker ({@code cudaIpcOpenEventHandle}, torch's {@code Event.from_ipc_handle})
     * makes that worker its own imported event, and waiting on or querying a complete event returns at
     * once. Needs only the primary context, not the copy engine (whose staging memory a failure should
     * not allocate).
     */
    public byte[] completedEvent() {
        byte[] handle = completedHandle;
        return (handle != null ? handle : makeCompletedEvent()).clone();
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
        }
    }
}
