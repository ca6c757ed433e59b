package io.lmcache.server.cuda;

import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.JCudaDriver;

/**
 * One GPU: its primary context (retained on first use, so a host whose workers never use a GPU
 * creates no context on it), its IPC mappings and its copy engine.
 */
public final class CudaDevice {
    private final int ordinal;
    private final CUdevice device;
    private final String uuid;
    private final String name;
    private CUcontext context;
    private IpcMemory ipc;
    private CopyEngine engine;

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
    public synchronized CopyEngine engine(EventPoller poller, PinnedPool pool) {
        if (engine == null) {
            makeCurrent();
            engine = new CopyEngine(this, poller, pool);
        }
        return engine;
    }

    /** The copy engine if a transfer ever created it, else null (for counters: reading them creates nothing). */
    synchronized CopyEngine existingEngine() {
        return engine;
    }

    synchronized void close() {
        if (engine != null) {
            engine.close();
        }
        if (context != null) {
            JCudaDriver.cuDevicePrimaryCtxRelease(device);
            context = null;
        }
    }
}
