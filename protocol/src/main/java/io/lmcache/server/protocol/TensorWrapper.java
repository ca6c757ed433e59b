package io.lmcache.server.protocol;

import java.util.Arrays;
import java.util.Objects;

/**
 * One registered KV-cache tensor as the worker shared it (a pickled wrapper inside msgpack ext 1).
 * Shape and stride are in elements and describe the physical layout (the client makes views
 * contiguous before wrapping); {@code storageOffset} is in elements too.
 */
public sealed interface TensorWrapper
        permits TensorWrapper.CpuShm, TensorWrapper.CudaIpc, TensorWrapper.RawCudaIpc, TensorWrapper.VmmCudaIpc,
        TensorWrapper.Unsupported {

    DType dtype();

    long[] shape();

    long[] stride();

    long storageOffset();

    String deviceUuid();

    /** Elements from the start of the storage to one past the last element the view can touch. */
    default long storageElementsSpanned() {
        long last = storageOffset();
        long[] shape = shape();
        long[] stride = stride();
        for (int i = 0; i < shape.length; i++) {
            if (shape[i] == 0) {
                return storageOffset();
            }
            last += (shape[i] - 1) * stride[i];
        }
        return last + 1;
    }

    /** A CPU tensor in POSIX shared memory ({@code lmcache.v1.platform.cpu.shm.CpuShmTensorWrapper}). */
    record CpuShm(String shmName, long nbytes, DType dtype, long[] shape, long[] stride, long storageOffset, String deviceUuid)
            implements TensorWrapper {
        @Override
        public boolean equals(Object other) {
            return other instanceof CpuShm o && shmName.equals(o.shmName) && nbytes == o.nbytes && dtype == o.dtype
                    && Arrays.equals(shape, o.shape) && Arrays.equals(stride, o.stride) && storageOffset == o.storageOffset
                    && deviceUuid.equals(o.deviceUuid);
        }

        @Override
        public int hashCode() {
            return Objects.hash(shmName, nbytes, dtype, Arrays.hashCode(shape), storageOffset);
        }
    }

    /**
     * A CUDA tensor shared through PyTorch's storage IPC ({@code CudaIPCWrapper}; also the older
     * {@code custom_types.CudaIPCWrapper}).
     */
    record CudaIpc(CudaStorageHandle handle, DType dtype, long[] shape, long[] stride, long storageOffset, String deviceUuid)
            implements TensorWrapper {
        @Override
        public boolean equals(Object other) {
            return other instanceof CudaIpc o && handle.equals(o.handle) && dtype == o.dtype && Arrays.equals(shape, o.shape)
                    && Arrays.equals(stride, o.stride) && storageOffset == o.storageOffset && deviceUuid.equals(o.deviceUuid);
        }

        @Override
        public int hashCode() {
            return Objects.hash(handle, dtype, Arrays.hashCode(shape), storageOffset);
        }
    }

    /** A CUDA tensor shared as a raw {@code cudaIpcMemHandle_t} of its allocation ({@code RawCudaIPCWrapper}). */
    record RawCudaIpc(byte[] memHandle, long allocOffset, long nbytes, DType dtype, long[] shape, long[] stride,
            long storageOffset, String deviceUuid) implements TensorWrapper {
        @Override
        public boolean equals(Object other) {
            return other instanceof RawCudaIpc o && Arrays.equals(memHandle, o.memHandle) && allocOffset == o.allocOffset
                    && nbytes == o.nbytes && dtype == o.dtype && Arrays.equals(shape, o.shape) && Arrays.equals(stride, o.stride)
                    && storageOffset == o.storageOffset && deviceUuid.equals(o.deviceUuid);
        }

        @Override
        public int hashCode() {
            return Objects.hash(Arrays.hashCode(memHandle), allocOffset, nbytes, Arrays.hashCode(shape));
        }
    }

    /** How a VMM (cuMem) allocation is shared: a fabric handle inline, or a POSIX fd that would come out of band. */
    enum VmmKind { FABRIC, POSIX_FD }

    /**
     * A CUDA tensor in a VMM (cuMem) allocation ({@code VmmCudaIPCWrapper}, LMCache/LMCache#4805): the exporter's physical
     * chunk of {@code allocSize} bytes, the tensor {@code allocOffset} bytes into it; {@code fabricHandle} is the 64-byte
     * {@code CUmemFabricHandle} (empty for the POSIX-fd kind); {@code exportId} names the export (a new one per wrapper).
     */
    record VmmCudaIpc(byte[] exportId, VmmKind kind, byte[] fabricHandle, long allocSize, long allocOffset, long nbytes, DType dtype,
            long[] shape, long[] stride, long storageOffset, String deviceUuid) implements TensorWrapper {
        @Override
        public boolean equals(Object other) {
            return other instanceof VmmCudaIpc o && Arrays.equals(exportId, o.exportId) && kind == o.kind
                    && Arrays.equals(fabricHandle, o.fabricHandle) && allocSize == o.allocSize && allocOffset == o.allocOffset
                    && nbytes == o.nbytes && dtype == o.dtype && Arrays.equals(shape, o.shape) && Arrays.equals(stride, o.stride)
                    && storageOffset == o.storageOffset && deviceUuid.equals(o.deviceUuid);
        }

        @Override
        public int hashCode() {
            return Objects.hash(Arrays.hashCode(exportId), kind, allocSize, allocOffset, nbytes, Arrays.hashCode(shape));
        }
    }

    /** A wrapper class this server knows but cannot serve (e.g. VMM / expandable segments); {@code reason} says why. */
    record Unsupported(String className, String reason) implements TensorWrapper {
        @Override
        public DType dtype() {
            return DType.UINT8;
        }

        @Override
        public long[] shape() {
            return new long[0];
        }

        @Override
        public long[] stride() {
            return new long[0];
        }

        @Override
        public long storageOffset() {
            return 0;
        }

        @Override
        public String deviceUuid() {
            return "";
        }
    }

    /**
     * The 8-tuple of {@code UntypedStorage._share_cuda_()} (protocol doc §6.3).
     *
     * @param memHandle the 64-byte {@code cudaIpcMemHandle_t} of the allocation's base
     * @param segmentType 'c' (cudaMalloc segment), 'e' (expandable segment: not openable), or 0 when
     *     the handle came without torch's 2-byte prefix
     * @param storageOffsetBytes byte offset of the storage inside the IPC allocation
     * @param eventHandle the producer's {@code cudaIpcEventHandle_t} (64 bytes) or empty
     */
    record CudaStorageHandle(int deviceIndex, byte[] memHandle, char segmentType, long storageSizeBytes,
            long storageOffsetBytes, byte[] eventHandle, boolean eventSyncRequired) {
        /** Equal when they name the same memory: the producer's event handle changes between shares and does not count. */
        @Override
        public boolean equals(Object other) {
            return other instanceof CudaStorageHandle o && Arrays.equals(memHandle, o.memHandle) && segmentType == o.segmentType
                    && storageSizeBytes == o.storageSizeBytes && storageOffsetBytes == o.storageOffsetBytes;
        }

        @Override
        public int hashCode() {
            return Objects.hash(Arrays.hashCode(memHandle), storageSizeBytes, storageOffsetBytes);
        }
    }
}
