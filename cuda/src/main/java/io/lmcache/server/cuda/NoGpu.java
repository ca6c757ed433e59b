package io.lmcache.server.cuda;

import io.lmcache.server.protocol.EventHandle;
import io.lmcache.server.protocol.TensorWrapper;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.Map;

/** The backend of a server without CUDA (no driver, no GPU, or {@code --device host}): CUDA tensors are refused. */
public final class NoGpu implements GpuBackend {
    static final NoGpu INSTANCE = new NoGpu();
    /** Never tracks an event: no transfer runs on this backend. */
    private static final EventPoller IDLE_POLLER = new EventPoller();
    private static final String REFUSED = "CUDA IPC tensors need the CUDA path, which this server is not running (no CUDA driver or GPU"
            + " found, or --device host)";

    private NoGpu() {}

    @Override
    public boolean available() {
        return false;
    }

    @Override
    public String describe() {
        return "host only (no CUDA)";
    }

    @Override
    public List<String> pciBusIds() {
        return List.of();
    }

    @Override
    public PinnedPool pinnedPool(int regions, long regionBytes) {
        throw new CudaException("no CUDA: the pool is not pinned");
    }

    @Override
    public void pin(int region, MemorySegment slice) {
        throw new CudaException("no CUDA: the pool is not pinned");
    }

    @Override
    public void pinNow(int region) {
        throw new CudaException("no CUDA: the pool is not pinned");
    }

    @Override
    public boolean awaitPoolPinned(long deadlineNs) {
        return true; // nothing is pinned without CUDA
    }

    @Override
    public DeviceTensors open(List<TensorWrapper> wrappers, Executor release) {
        throw new CudaException(REFUSED);
    }

    @Override
    public CopyEngine engine(CudaDevice device) {
        throw new CudaException(REFUSED);
    }

    /** 64 zero bytes: only CPU workers are served, and they ignore the handle. */
    @Override
    public byte[] failureEvent(String deviceUuid) {
        return new byte[64];
    }

    @Override
    public byte[] completeTimelineEvent(String deviceUuid) {
        return EventHandle.Timeline.complete(new byte[64]).encode();
    }

    @Override
    public long copyNanos(Direction direction) {
        return 0;
    }

    @Override
    public long copyBytes(Direction direction) {
        return 0;
    }

    @Override
    public void resetCopyCounters() {
    }

    @Override
    public EventPoller eventPoller() {
        return IDLE_POLLER;
    }

    @Override
    public Map<String, Object> status() {
        return Map.of("available", false);
    }

    @Override
    public void close() {
    }
}
