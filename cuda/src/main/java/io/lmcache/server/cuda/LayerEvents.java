package io.lmcache.server.cuda;

import java.util.ArrayList;
import java.util.List;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUipcEventHandle;
import jcuda.driver.JCudaDriver;

/**
 * LMCache's layer-wise event pool for one registered worker ({@code lmcache/v1/platform/base/event_pool.py@192b94f7}): interprocess
 * events made once on the worker's GPU, their {@code cuIpcGetEventHandle} handles sent once at REGISTER_LAYERWISE_IPC_EVENT_POOL;
 * a RETRIEVE_LAYERWISE then records event {@code i} after a layer batch's copies and names it by index only. Destroyed when
 * the registration is released (the release thread), after its last transfer.
 */
public final class LayerEvents implements AutoCloseable {
    /** LMCache's {@code EVENT_POOL_SIZE}: one event per layer of every current model, with headroom. */
    public static final int POOL_SIZE = 256;

    private final CudaDevice device;
    private final CUevent[] events;
    private final List<byte[]> handles;
    private boolean closed;

    private LayerEvents(CudaDevice device, CUevent[] events, List<byte[]> handles) {
        this.device = device;
        this.events = events;
        this.handles = handles;
    }

    /** Makes and exports {@code size} interprocess events on {@code device}; on a failure destroys those made and throws. */
    public static LayerEvents create(CudaDevice device, int size) {
        CUevent[] events = new CUevent[size];
        List<byte[]> handles = new ArrayList<>(size);
        device.makeCurrent();
        try {
            for (int i = 0; i < size; i++) {
                events[i] = CopyEngine.event(CUevent_flags.CU_EVENT_INTERPROCESS | CUevent_flags.CU_EVENT_DISABLE_TIMING);
                CUipcEventHandle handle = new CUipcEventHandle();
                Cu.check(JCudaDriver.cuIpcGetEventHandle(handle, events[i]), "cuIpcGetEventHandle(layer event " + i + ")");
                handles.add(Cu.bytes(handle));
            }
        } catch (RuntimeException e) {
            destroy(events);
            throw e;
        }
        return new LayerEvents(device, events, List.copyOf(handles));
    }

    /** The exported handles, in pool order (64 bytes each). */
    public List<byte[]> handles() {
        return handles;
    }

    public int size() {
        return events.length;
    }

    CUevent event(int index) {
        return events[index];
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        device.makeCurrent();
        destroy(events);
    }

    private static void destroy(CUevent[] events) {
        for (CUevent event : events) {
            if (event != null) {
                JCudaDriver.cuEventDestroy(event);
            }
        }
    }
}
