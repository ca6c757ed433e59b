package io.lmcache.server.cuda;

import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUipcMem_flags;
import jcuda.driver.JCudaDriver;

/**
 * The CUDA IPC allocations opened on one device, refcounted: several layers (and re-registrations)
 * often share one allocation, CUDA maps a handle once per context, and one close unmaps it for
 * every user, so each distinct handle is opened once and closed when its last user goes.
 */
public final class IpcMemory {
    /** One opened allocation: its base pointer and raw address. */
    public static final class Mapping {
        final String key;
        final CUdeviceptr base;
        final long address;
        int refs;

        Mapping(String key, CUdeviceptr base, long address) {
            this.key = key;
            this.base = base;
            this.address = address;
        }

        public long address() {
            return address;
        }

        public CUdeviceptr base() {
            return base;
        }
    }

    /** How long an open waits for a close of the same allocation that is still in the driver. */
    private static final long CLOSING_WAIT_NS = TimeUnit.SECONDS.toNanos(10);

    private final CudaDevice device;
    /** Guarded by {@code this}: the open mappings, and those whose close is in the driver now. */
    private final Map<String, Mapping> open = new HashMap<>();
    private final Map<String, CountDownLatch> closing = new HashMap<>();

    IpcMemory(CudaDevice device) {
        this.device = device;
    }

    /**
     * Opens (or shares) the allocation behind a 64-byte {@code cudaIpcMemHandle_t}. Runs on a
     * transfer lane (REGISTER), never on the socket thread. When the same allocation's last close
     * is still in the driver, it waits for that close (bounded, without holding the lock) and then
     * opens afresh: CUDA maps a handle once per context, so opening it during the close would race
     * the unmap. A close stuck past the bound fails this registration with a clear message.
     */
    public Mapping acquire(byte[] handle) {
        String key = HexFormat.of().formatHex(handle);
        while (true) {
            CountDownLatch closed;
            synchronized (this) {
                closed = closing.get(key);
                if (closed == null) {
                    return openOrShare(key, handle);
                }
            }
            try {
                if (!closed.await(CLOSING_WAIT_NS, TimeUnit.NANOSECONDS)) {
                    throw new CudaException("the previous mapping of this allocation on GPU " + device.ordinal() + " is still being"
                            + " closed after " + TimeUnit.NANOSECONDS.toSeconds(CLOSING_WAIT_NS) + " s (cuIpcCloseMemHandle stuck in"
                            + " the driver); register again later");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CudaException("interrupted while waiting for a close of the same allocation");
            }
        }
    }

    private Mapping openOrShare(String key, byte[] handle) {
        Mapping mapping = open.get(key);
        if (mapping == null) {
            device.makeCurrent();
            CUdeviceptr base = new CUdeviceptr();
            Cu.check(JCudaDriver.cuIpcOpenMemHandle(base, Cu.memHandle(handle), CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                    "cuIpcOpenMemHandle on GPU " + device.ordinal());
            mapping = new Mapping(key, base, Cu.address(base));
            open.put(key, mapping);
        }
        mapping.refs++;
        return mapping;
    }

    /**
     * Gives back one use; the last one closes the mapping, outside the lock (on the release
     * thread), so a close that hangs in the driver blocks no REGISTER of another allocation.
     */
    public void release(Mapping mapping) {
        CountDownLatch closed;
        synchronized (this) {
            if (--mapping.refs > 0) {
                return;
            }
            open.remove(mapping.key);
            closed = new CountDownLatch(1);
            closing.put(mapping.key, closed);
        }
        boolean ok = false;
        try {
            device.makeCurrent();
            Cu.check(JCudaDriver.cuIpcCloseMemHandle(mapping.base), "cuIpcCloseMemHandle on GPU " + device.ordinal());
            ok = true;
        } finally {
            synchronized (this) {
                closing.remove(mapping.key);
                if (!ok) {
                    // still mapped as far as we know: a retry of this release closes it again
                    mapping.refs++;
                    open.put(mapping.key, mapping);
                }
            }
            closed.countDown();
        }
    }

    public synchronized int openMappings() {
        return open.size();
    }
}
