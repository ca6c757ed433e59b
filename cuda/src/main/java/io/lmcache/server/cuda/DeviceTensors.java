package io.lmcache.server.cuda;

import io.lmcache.server.protocol.TensorWrapper;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executor;
import jcuda.driver.CUdeviceptr;

/**
 * A worker's KV tensors opened through CUDA IPC on their GPU: per tensor, the device address of
 * the start of its storage (allocation base + the storage's offset in the allocation). Offsets
 * within a storage (the view's storage offset, blocks, layers) are added by the caller.
 */
public final class DeviceTensors implements AutoCloseable {
    private final CudaDevice device;
    private final List<IpcMemory.Mapping> mappings;
    private final long[] storageAddress;
    private final CUdeviceptr[] storagePointer;
    /** Mappings given back so far (a failed close is retried from here). */
    private int released;

    private DeviceTensors(CudaDevice device, List<IpcMemory.Mapping> mappings, long[] storageAddress, CUdeviceptr[] storagePointer) {
        this.device = device;
        this.mappings = mappings;
        this.storageAddress = storageAddress;
        this.storagePointer = storagePointer;
    }

    /**
     * Opens every wrapper's allocation on the GPU its UUID names. On failure nothing stays open: the
     * mappings opened so far are given back through {@code release} (the server's release thread:
     * a close can hang in the driver, never on the calling thread).
     */
    public static DeviceTensors open(CudaDevices devices, List<TensorWrapper> wrappers, Executor release) {
        CudaDevice device = devices.byUuid(wrappers.getFirst().deviceUuid());
        List<IpcMemory.Mapping> mappings = new ArrayList<>();
        long[] addresses = new long[wrappers.size()];
        CUdeviceptr[] pointers = new CUdeviceptr[wrappers.size()];
        try {
            for (int i = 0; i < wrappers.size(); i++) {
                TensorWrapper wrapper = wrappers.get(i);
                byte[] handle;
                long offset;
                switch (wrapper) {
                    case TensorWrapper.CudaIpc ipc -> {
                        if (ipc.handle().segmentType() == 'e') {
                            throw new CudaException("tensor " + i + " lives in an expandable segment (PYTORCH_CUDA_ALLOC_CONF="
                                    + "expandable_segments), which legacy CUDA IPC cannot open; run vLLM without expandable segments");
                        }
                        handle = ipc.handle().memHandle();
                        offset = ipc.handle().storageOffsetBytes();
                    }
                    case TensorWrapper.RawCudaIpc raw -> {
                        handle = raw.memHandle();
                        offset = raw.allocOffset();
                    }
                    default -> throw new CudaException("tensor " + i + " is not a CUDA IPC tensor: " + wrapper.getClass().getSimpleName());
                }
                if (!CudaDevices.normalizeUuid(wrapper.deviceUuid()).equals(device.uuid())) {
                    throw new CudaException("tensor " + i + " is on GPU " + wrapper.deviceUuid() + ", tensor 0 on " + device.uuid()
                            + ": one worker's KV cache must be on one GPU");
                }
                IpcMemory.Mapping mapping = device.ipc().acquire(handle);
                mappings.add(mapping);
                addresses[i] = mapping.address() + offset;
                pointers[i] = mapping.base().withByteOffset(offset);
            }
        } catch (RuntimeException e) {
            if (!mappings.isEmpty()) {
                release.execute(() -> mappings.forEach(device.ipc()::release));
            }
            throw e;
        }
        return new DeviceTensors(device, List.copyOf(mappings), addresses, pointers);
    }

    /**
     * {@code count} tensors that all start at {@code base}, memory this server allocated itself ({@link ScratchMemory}): no
     * IPC mapping, so {@link #close} gives nothing back (the scratch memory's owner frees it).
     */
    static DeviceTensors scratch(CudaDevice device, CUdeviceptr base, int count) {
        long[] addresses = new long[count];
        CUdeviceptr[] pointers = new CUdeviceptr[count];
        for (int i = 0; i < count; i++) {
            addresses[i] = Cu.address(base);
            pointers[i] = base;
        }
        return new DeviceTensors(device, List.of(), addresses, pointers);
    }

    public CudaDevice device() {
        return device;
    }

    public long[] storageAddresses() {
        return storageAddress;
    }

    CUdeviceptr storagePointer(int tensor) {
        return storagePointer[tensor];
    }

    /**
     * Closes this worker's share of the IPC mappings (the last user unmaps them). Called by the
     * release thread only; when a close fails, a retry resumes at the mapping that failed.
     */
    @Override
    public synchronized void close() {
        while (released < mappings.size()) {
            device.ipc().release(mappings.get(released));
            released++;
        }
    }
}
