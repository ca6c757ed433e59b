package io.lmcache.server.cuda;

import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
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

    private final CudaDevice device;
    private final Map<String, Mapping> open = new HashMap<>();

    IpcMemory(CudaDevice device) {
        this.device = device;
    }

    /** Opens (or shares) the allocation behind a 64-byte {@code cudaIpcMemHandle_t}. */
    public synchronized Mapping acquire(byte[] handle) {
        String key = HexFormat.of().formatHex(handle);
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

    /** Gives back one use; the last one closes the mapping. */
    public synchronized void release(Mapping mapping) {
        if (--mapping.refs == 0) {
            open.remove(mapping.key);
            device.makeCurrent();
            Cu.check(JCudaDriver.cuIpcCloseMemHandle(mapping.base), "cuIpcCloseMemHandle on GPU " + device.ordinal());
        }
    }

    public synchronized int openMappings() {
        return open.size();
    }
}
