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
    /** VMM imports (one per VMM wrapper, as LMCache's importer keeps them), released in reverse after the IPC mappings. */
    private final List<VmmImport> imports;
    private final long[] storageAddress;
    private final CUdeviceptr[] storagePointer;
    /** Bytes readable from each storage's start (its wrapper's storage or tensor size); 0 for scratch memory. */
    private final long[] storageBytes;
    /** Mappings given back so far (a failed close is retried from here). */
    private int released;

    private DeviceTensors(CudaDevice device, List<IpcMemory.Mapping> mappings, List<VmmImport> imports, long[] storageAddress,
            CUdeviceptr[] storagePointer, long[] storageBytes) {
        this.device = device;
        this.mappings = mappings;
        this.imports = imports;
        this.storageAddress = storageAddress;
        this.storagePointer = storagePointer;
        this.storageBytes = storageBytes;
    }

    /**
     * Opens every wrapper's allocation on the GPU its UUID names. On failure nothing stays open: the
     * mappings opened so far are given back through {@code release} (the server's release thread:
     * a close can hang in the driver, never on the calling thread).
     */
    public static DeviceTensors open(CudaDevices devices, List<TensorWrapper> wrappers, Executor release) {
        CudaDevice device = devices.byUuid(wrappers.getFirst().deviceUuid());
        List<IpcMemory.Mapping> mappings = new ArrayList<>();
        List<VmmImport> imports = new ArrayList<>();
        long[] addresses = new long[wrappers.size()];
        CUdeviceptr[] pointers = new CUdeviceptr[wrappers.size()];
        long[] sizes = new long[wrappers.size()];
        try {
            for (int i = 0; i < wrappers.size(); i++) {
                TensorWrapper wrapper = wrappers.get(i);
                if (!CudaDevices.normalizeUuid(wrapper.deviceUuid()).equals(device.uuid())) {
                    throw new CudaException("tensor " + i + " is on GPU " + wrapper.deviceUuid() + ", tensor 0 on " + device.uuid()
                            + ": one worker's KV cache must be on one GPU");
                }
                if (wrapper instanceof TensorWrapper.VmmCudaIpc vmm) {
                    VmmImport imported = importVmm(device, i, vmm);
                    imports.add(imported);
                    addresses[i] = imported.address() + vmm.allocOffset();
                    pointers[i] = imported.pointer(vmm.allocOffset());
                    sizes[i] = vmm.nbytes();
                    continue;
                }
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
                        sizes[i] = ipc.handle().storageSizeBytes();
                    }
                    case TensorWrapper.RawCudaIpc raw -> {
                        handle = raw.memHandle();
                        offset = raw.allocOffset();
                        sizes[i] = raw.nbytes();
                    }
                    default -> throw new CudaException("tensor " + i + " is not a CUDA IPC tensor: " + wrapper.getClass().getSimpleName());
                }
                IpcMemory.Mapping mapping = device.ipc().acquire(handle);
                mappings.add(mapping);
                addresses[i] = mapping.address() + offset;
                pointers[i] = mapping.base().withByteOffset(offset);
            }
            if (wrappers.getFirst() instanceof TensorWrapper.RawCudaIpc) {
                // RawCudaIPCWrapper is what an isolated-IPC worker registers: its events will be timeline semaphores, whose
                // buffer (a cudaMalloc, which may synchronize the device) is made now rather than during its first transfer
                device.semaphores();
            }
        } catch (RuntimeException e) {
            if (!mappings.isEmpty() || !imports.isEmpty()) {
                release.execute(() -> {
                    mappings.forEach(device.ipc()::release);
                    imports.reversed().forEach(imported -> imported.release(device));
                });
            }
            throw e;
        }
        return new DeviceTensors(device, List.copyOf(mappings), List.copyOf(imports), addresses, pointers, sizes);
    }

    /**
     * A VMM wrapper's chunk imported and mapped (fabric kind). The POSIX-fd kind's fd would come out of band through a
     * transport LMCache has not merged (newest-clients.md §1.5), so it is refused: the registration gets its reply and the
     * worker's transfers {@code (valid event, false)}, so vLLM recomputes instead of waiting.
     */
    private static VmmImport importVmm(CudaDevice device, int i, TensorWrapper.VmmCudaIpc vmm) {
        if (vmm.kind() == TensorWrapper.VmmKind.POSIX_FD) {
            throw new CudaException("VMM wrapper kind=posix_fd not supported (tensor " + i + "): its fd transport is not part of"
                    + " LMCache's protocol yet; run vLLM's cumem allocator with fabric handles (an IMEX channel) or without it");
        }
        return VmmImport.fabric(device, vmm.fabricHandle(), vmm.allocSize());
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
        return new DeviceTensors(device, List.of(), List.of(), addresses, pointers, new long[count]);
    }

    /**
     * {@code count} tensors on the first {@code bytes} of this worker's storages (tensor {@code i} on storage {@code i % n}),
     * for the GPU warm-up's reads of real KV into scratch memory (issue 52); null when a storage is smaller than {@code bytes}.
     * Nothing is mapped anew: {@link #close} of the aliases gives nothing back, and the caller keeps this worker's tensors open
     * (a lease on its registration) for as long as a copy may read through them.
     */
    public DeviceTensors readAliases(int count, long bytes) {
        int n = storageAddress.length;
        for (long size : storageBytes) {
            if (size < bytes) {
                return null;
            }
        }
        if (n == 0) {
            return null;
        }
        long[] addresses = new long[count];
        CUdeviceptr[] pointers = new CUdeviceptr[count];
        long[] sizes = new long[count];
        for (int i = 0; i < count; i++) {
            addresses[i] = storageAddress[i % n];
            pointers[i] = storagePointer[i % n];
            sizes[i] = bytes;
        }
        return new DeviceTensors(device, List.of(), List.of(), addresses, pointers, sizes);
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
        for (VmmImport imported : imports.reversed()) {
            imported.release(device); // never throws; a second close finds it released
        }
    }
}
