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
     * Opens the driver and lists the GPUs; throws {@link CudaException} (with the reason) when there is no usable GPU. Makes
     * no context: a GPU gets one at the first REGISTER of tensors on it (so before any REGISTER the server holds no device
     * memory anywhere), with the complete event its failure replies carry. The copy engines run with {@code tuning}'s
     * {@code -Dlmcache.cuda.*} knobs; {@code eventsWake} wakes the thread that polls the transfers' events when one is tracked.
     */
    static GpuBackend open(Tuning tuning, Runnable eventsWake) {
        return new CudaBackend(CudaDevices.open(tuning.stackLimitBytes()), tuning, eventsWake);
    }

    /** The host-only backend: nothing is CUDA, every counter is 0. */
    static GpuBackend none() {
        return NoGpu.INSTANCE;
    }

    /** Whether CUDA workers can be served. */
    boolean available();

    String describe();

    /** The GPUs' PCI bus ids in device order ({@code 0000:18:00.0}; "" where the driver did not say); none without CUDA. */
    List<String> pciBusIds();

    /** The pool's pinning (CUDA only): regions are handed to it as they are prepared and pinned from the first REGISTER on. */
    PinnedPool pinnedPool(int regions, long regionBytes);

    void pin(int region, MemorySegment slice);

    /**
     * Pins a prepared pool region now on the calling thread unless it is pinned already ({@link PinnedPool#pinNow}): the
     * GPU warm-up's, for the regions the first STOREs allocate from. Throws {@link CudaException} when it cannot (no CUDA,
     * no GPU registration yet, the region not prepared, or the driver refused).
     */
    void pinNow(int region);

    /**
     * Waits until the pool's background pinning, started by the first GPU registration, has ended, or until {@code deadlineNs}
     * (System.nanoTime) at the latest; whether it has. True where nothing is being pinned (no CUDA, no pinned pool).
     */
    boolean awaitPoolPinned(long deadlineNs);

    /** Opens a worker's CUDA IPC tensors; throws {@link CudaException} (with the reason) when it cannot. */
    DeviceTensors open(List<TensorWrapper> wrappers, Executor release);

    CopyEngine engine(CudaDevice device);

    /**
     * The handle of a recorded, always-complete interprocess event on the GPU with this UUID (any GPU
     * with a context when it is null, unknown or has none), made with each GPU's context ({@link CudaDevice#completedEvent}):
     * what a STORE or RETRIEVE answers with when it copied nothing, so a GPU worker can open it and
     * wait. 64 zero bytes on the host-only backend (a CPU worker ignores the handle). Makes no driver
     * call once a GPU has a context; before any has, makes the first GPU's (once) and may throw
     * {@link CudaException}.
     */
    byte[] failureEvent(String deviceUuid);

    /**
     * {@link #failureEvent}'s counterpart for an isolated-IPC request: the complete timeline-semaphore event (slot 0, sequence
     * 0) of this server's semaphore buffer on the GPU with this UUID (or one with a context; the first GPU), 81 bytes. The
     * worker opens the buffer even for sequence 0, so the handle must be real; the host-only backend's is 64 zero bytes
     * (a CPU worker ignores it). May throw {@link CudaException}.
     */
    byte[] completeTimelineEvent(String deviceUuid);

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
