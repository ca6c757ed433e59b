package io.lmcache.server.protocol;

/**
 * One registered KV-cache tensor as the worker shared it (a pickled wrapper inside msgpack ext 1).
 * Shape and stride are in elements and describe the physical layout (the client makes views
 * contiguous before wrapping); {@code storageOffset} is in elements too.
 */
public sealed interface TensorWrapper
        permits TensorWrapper.CpuShm, TensorWrapper.CudaIpc, TensorWrapper.RawCudaIpc, TensorWrapper.Unsupported {

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
            implements TensorWrapper {}

    /**
     * A CUDA tensor shared through PyTorch's storage IPC ({@code CudaIPCWrapper}; also the older
     * {@code custom_types.CudaIPCWrapper}).
     */
    record CudaIpc(CudaStorageHandle handle, DType dtype, long[] shape, long[] stride, long storageOffset, String deviceUuid)
            implements TensorWrapper {}

    /** A CUDA tensor shared as a raw {@code cudaIpcMemHandle_t} of its allocation ({@code RawCudaIPCWrapper}). */
    record RawCudaIpc(byte[] memHandle, long allocOffset, long nbytes, DType dtype, long[] shape, long[] stride,
            long storageOffset, String deviceUuid) implements TensorWrapper {}

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
            long storageOffsetBytes, byte[] eventHandle, boolean eventSyncRequired) {}
}
