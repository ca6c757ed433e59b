package io.lmcache.server.cuda;

import io.lmcache.server.config.Tuning;
import io.lmcache.server.protocol.TensorWrapper;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.Map;

/**
 * Everything the server needs from CUDA, in one place: the devices, opening a worker's tensors,
 * each device's copy engine, the pinned pool and the event poller. {@link CudaBackend} when a
 * driver and a GPU were found; {@link NoGpu} otherwise (the server then serves CPU workers over
 * shared memory, and a CUDA registration is refused with a clear message).
 */
public sealed interface GpuBackend extends AutoCloseable permits CudaBackend, NoGpu {
    /**
     * Opens the driver; throws {@link CudaException} (with the reason) when there is no usable GPU. The copy engines run with
     * {@code tuning}'s {@code -Dlmcache.cuda.*} knobs.
     */
    static GpuBackend open(Tuning tuning) {
        CudaDevices devices = CudaDevices.open();
        try {
            // the first GPU's context is retained at start-up anyway (the pool is pinned through it): its failure
            // event made now, no failure reply ever makes a driver call, not even on the socket thread
            devices.devices().getFirst().completedEvent();
        } catch (RuntimeException e) {
            devices.close();
            throw e;
        }
        return new CudaBackend(devices, tuning);
    }

    /** The host-only backend: nothing is CUDA, every counter is 0. */
    static GpuBackend none() {
        return NoGpu.INSTANCE;
    }

    /** Whether CUDA workers can be served. */
    boolean available();

    String describe();

    /** Pins the pool's regions as they are prepared (CUDA only). */
    PinnedPool pinnedPool(int regions, long regionBytes);

    void pin(int region, MemorySegment slice);

    /** Opens a worker's CUDA IPC tensors; throws {@link CudaException} (with the reason) when it cannot. */
    DeviceTensors open(List<TensorWrapper> wrappers, Executor release);

    CopyEngine engine(CudaDevice device);

    /**
     * The handle of a recorded, always-complete interprocess event on the GPU with this UUID (the
     * first GPU when it is null or unknown), made once per GPU ({@link CudaDevice#completedEvent}):
     * what a STORE or RETRIEVE answers with when it copied nothing, so a GPU worker can open it and
     * wait. 64 zero bytes on the host-only backend (a CPU worker ignores the handle). Throws
     * {@link CudaException} when CUDA cannot make it.
     */
    byte[] failureEvent(String deviceUuid);

    /** GPU time of the completed transfers in one direction, over every device. */
    long copyNanos(Direction direction);

    /** Bytes of the completed transfers in one direction, over every device. */
    long copyBytes(Direction direction);

    void resetCopyCounters();

    /**
     * The poller of the exported transfer events; the server runs its {@code doWork()} as the agent on
     * lmcache-cuda-events when {@link #available()}. The host-only backend's never has an event.
     */
    EventPoller eventPoller();

    /** What /status shows of CUDA. */
    Map<String, Object> status();

    @Override
    void close();
}
