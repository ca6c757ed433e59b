package io.lmcache.server.cuda;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteOrder;
import java.nio.LongBuffer;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUfunction;
import jcuda.driver.CUipcEventHandle;
import jcuda.driver.CUmodule;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;

/**
 * Moves a transfer's pieces between a worker's GPU blocks and the pinned pool on one device.
 *
 * <p>Pieces (a block of one layer: 2 KiB to a few MiB) go through a staging buffer in device
 * memory: for a STORE the gather kernel packs them into one half of the buffer and the copy engine
 * moves the half to the pool in long DMA runs (a chunk's object is contiguous there) while the
 * kernel fills the other half; a RETRIEVE runs the same pipeline backwards. Only a piece larger
 * than a half is one DMA call of its own. So the PCIe link is always driven by the copy engines,
 * which reach the line rate in both directions at once, and the kernel (on {@link #KERNEL_BLOCKS}
 * blocks, so the model keeps the other SMs) only touches device memory; it reads its descriptors
 * from mapped pinned host memory, so no descriptor upload queues behind a bulk DMA. Copying over
 * PCIe from the kernel itself was measured at the line rate one way but at about 58 GB/s for a
 * STORE and a RETRIEVE together, against 100 GB/s for DMA.
 *
 * <p>Each transfer first waits (on the GPU, not the CPU) for the worker's event, so a STORE never
 * reads blocks before the forward pass wrote them and a RETRIEVE never overwrites blocks still in
 * use; then it records an interprocess event, exports its handle for the reply and hands the
 * completion to the {@link EventPoller}. STOREs and RETRIEVEs have their own lanes (streams,
 * staging, descriptor ring, lock), so a STORE waiting for a descriptor slot never holds up a
 * RETRIEVE; RETRIEVE runs at the highest stream priority.
 */
public final class CopyEngine implements AutoCloseable {
    /** Blocks of the gather/scatter kernel (so SMs it can occupy); the model keeps the rest. */
    public static final int KERNEL_BLOCKS = Integer.getInteger("lmcache.cuda.copyBlocks", 8);
    /** Bytes of one staging half; each lane has two, so device memory used is four times this. */
    public static final long STAGING_HALF_BYTES = Math.max(1L << 20, Long.getLong("lmcache.cuda.stagingMiB", 32) << 20);
    /**
     * The first batch of a transfer that finds its lane idle (then {@link BatchSizes#GROWTH} times as much per batch, up to
     * a staging half). With whole halves, a one-chunk request (32 MiB) was one batch: its gather ran before any byte
     * crossed the link. Small first batches let the DMA start after a short gather, the growth keeps the
     * launches few on long transfers. Behind other transfers the link is busy anyway and small batches only
     * add launches (measured: 4 % less with four 128 MiB requests in flight), so those start at a half.
     */
    public static final long FIRST_BATCH_BYTES = Math.max(64L << 10, Long.getLong("lmcache.cuda.firstBatchKiB", 2048) << 10);
    /** Threads per block: a multiple of the kernel's GROUP (256 threads per piece). */
    static final int KERNEL_THREADS = 1024;
    /**
     * Descriptor slots per lane: one per batch, reused once the GPU has run it. A transfer takes a
     * slot per staging batch (4 for a 128 MiB request), and a submit whose slot is still in use
     * waits for the GPU; 64 slots keep 16 such requests in flight without that wait, in 6 MiB of
     * pinned memory per lane.
     */
    private static final int RING_SLOTS = 64;
    private static final int SLOT_DESCRIPTORS = 4096;
    private static final int DESCRIPTOR_FLAGS = JCudaDriver.CU_MEMHOSTALLOC_DEVICEMAP | JCudaDriver.CU_MEMHOSTALLOC_WRITECOMBINED;
    private static final int SYNC_FLAGS = CUevent_flags.CU_EVENT_DISABLE_TIMING;
    private static final int EXPORT_FLAGS = CUevent_flags.CU_EVENT_INTERPROCESS | CUevent_flags.CU_EVENT_DISABLE_TIMING;

    /** What {@link #submit} did: the handle to reply with, and whether the copies were enqueued. */
    public record Submitted(byte[] eventHandle, boolean accepted, String error) {}

    private final CudaDevice device;
    private final EventPoller poller;
    private final PinnedPool pool;
    private final CUfunction kernel;
    private final Lane store;
    private final Lane retrieve;
    private final ArrayDeque<CUevent[]> idleTimers = new ArrayDeque<>();
    private final LongAdder[] gpuNanos = {new LongAdder(), new LongAdder()};
    private final LongAdder[] copiedBytes = {new LongAdder(), new LongAdder()};
    private final SubmitTimes submitTimes = new SubmitTimes();

    /** The streams, staging halves and descriptor ring of one direction. */
    private static final class Lane {
        final CUstream kernelStream = new CUstream();
        final CUstream dmaStream = new CUstream();
        final CUdeviceptr[] staging = new CUdeviceptr[2];
        final long[] stagingAddress = new long[2];
        /** Recorded once a half's contents are consumed (the DMA out, or the scatter), so it may be refilled. */
        final CUevent[] drained = new CUevent[2];
        /** Recorded once a half holds its batch (the gather, or the DMA in). */
        final CUevent[] filled = new CUevent[2];
        /** Joins one stream into the other at the end of each transfer (see {@link #exportEvent}). */
        final CUevent join = new CUevent();
        /** Descriptor slots in mapped, write-combined pinned memory: the CPU writes them, the kernel reads them over PCIe. */
        final Pointer[] hostBuffers = new Pointer[RING_SLOTS];
        final LongBuffer[] hostViews = new LongBuffer[RING_SLOTS];
        final CUdeviceptr[] deviceViews = new CUdeviceptr[RING_SLOTS];
        final CUevent[] fences = new CUevent[RING_SLOTS];
        final boolean[] used = new boolean[RING_SLOTS];
        final StagedBatch batch = new StagedBatch(SLOT_DESCRIPTORS);
        /** Transfers submitted on this lane whose completion has not run yet (decremented on lmcache-cuda-events). */
        final AtomicInteger inFlight = new AtomicInteger();
        int nextSlot;
        int nextHalf;

        Lane(int priority) {
            for (CUstream stream : new CUstream[] {kernelStream, dmaStream}) {
                Cu.check(JCudaDriver.cuStreamCreateWithPriority(stream, CUstream_flags.CU_STREAM_NON_BLOCKING, priority),
                        "cuStreamCreateWithPriority");
            }
            for (int half = 0; half < 2; half++) {
                staging[half] = new CUdeviceptr();
                Cu.check(JCudaDriver.cuMemAlloc(staging[half], STAGING_HALF_BYTES), "cuMemAlloc(staging, "
                        + (STAGING_HALF_BYTES >> 20) + " MiB)");
                stagingAddress[half] = Cu.address(staging[half]);
                drained[half] = event(SYNC_FLAGS);
                filled[half] = event(SYNC_FLAGS);
            }
            Cu.check(JCudaDriver.cuEventCreate(join, SYNC_FLAGS), "cuEventCreate(join)");
            long bytes = 24L * SLOT_DESCRIPTORS;
            for (int slot = 0; slot < RING_SLOTS; slot++) {
                hostBuffers[slot] = new Pointer();
                Cu.check(JCudaDriver.cuMemHostAlloc(hostBuffers[slot], bytes, DESCRIPTOR_FLAGS), "cuMemHostAlloc(descriptors)");
                hostViews[slot] = hostBuffers[slot].getByteBuffer(0, bytes).order(ByteOrder.nativeOrder()).asLongBuffer();
                deviceViews[slot] = new CUdeviceptr();
                Cu.check(JCudaDriver.cuMemHostGetDevicePointer(deviceViews[slot], hostBuffers[slot], 0),
                        "cuMemHostGetDevicePointer(descriptors)");
                fences[slot] = event(SYNC_FLAGS);
            }
        }

        /** The next descriptor slot, once the GPU is done with its previous contents. */
        int takeSlot() {
            int slot = nextSlot;
            nextSlot = (nextSlot + 1) % RING_SLOTS;
            if (used[slot]) {
                Cu.check(JCudaDriver.cuEventSynchronize(fences[slot]), "cuEventSynchronize(descriptor fence)");
            }
            used[slot] = true;
            return slot;
        }

        int takeHalf() {
            int half = nextHalf;
            nextHalf ^= 1;
            return half;
        }

        void close() {
            JCudaDriver.cuStreamSynchronize(kernelStream);
            JCudaDriver.cuStreamSynchronize(dmaStream);
            for (int slot = 0; slot < RING_SLOTS; slot++) {
                JCudaDriver.cuEventDestroy(fences[slot]);
                JCudaDriver.cuMemFreeHost(hostBuffers[slot]);
            }
            for (int half = 0; half < 2; half++) {
                JCudaDriver.cuEventDestroy(drained[half]);
                JCudaDriver.cuEventDestroy(filled[half]);
                JCudaDriver.cuMemFree(staging[half]);
            }
            JCudaDriver.cuEventDestroy(join);
            JCudaDriver.cuStreamDestroy(kernelStream);
            JCudaDriver.cuStreamDestroy(dmaStream);
        }
    }

    CopyEngine(CudaDevice device, EventPoller poller, PinnedPool pool) {
        this.device = device;
        this.poller = poller;
        this.pool = pool;
        CUmodule module = new CUmodule();
        Cu.check(JCudaDriver.cuModuleLoadData(module, ptx()), "cuModuleLoadData(copy_pieces)");
        kernel = new CUfunction();
        Cu.check(JCudaDriver.cuModuleGetFunction(kernel, module, "copy_pieces"), "cuModuleGetFunction(copy_pieces)");
        int[] least = new int[1];
        int[] greatest = new int[1];
        Cu.check(JCudaDriver.cuCtxGetStreamPriorityRange(least, greatest), "cuCtxGetStreamPriorityRange");
        store = new Lane(least[0]);
        retrieve = new Lane(greatest[0]);
    }

    private static CUevent event(int flags) {
        CUevent event = new CUevent();
        Cu.check(JCudaDriver.cuEventCreate(event, flags), "cuEventCreate");
        return event;
    }

    private static byte[] ptx() {
        try (InputStream in = CopyEngine.class.getResourceAsStream("copy_pieces.ptx")) {
            if (in == null) {
                throw new CudaException("copy_pieces.ptx is missing from the jar");
            }
            byte[] text = in.readAllBytes();
            return Arrays.copyOf(text, text.length + 1); // cuModuleLoadData wants a C string
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * Enqueues one transfer and returns the event handle to reply with. When it is accepted the
     * completion runs once the copies finish (ok or not); when it is not, nothing of it runs on the
     * GPU after the returned (valid, recorded) event, and the completion runs with {@code false}
     * once that event fires.
     */
    public Submitted submit(Direction direction, DeviceTensors tensors, Pieces pieces, byte[] clientEvent,
            EventPoller.Completion completion) {
        Lane lane = direction == Direction.TO_POOL ? store : retrieve;
        synchronized (lane) {
            device.makeCurrent();
            return submit(direction, lane, tensors, pieces, clientEvent, completion);
        }
    }

    private Submitted submit(Direction direction, Lane lane, DeviceTensors tensors, Pieces pieces, byte[] clientEvent,
            EventPoller.Completion completion) {
        CUevent opened = null;
        CUevent[] timer = timer();
        String error = null;
        long startNs = System.nanoTime();
        long openedNs = startNs;
        try {
            if (!isZero(clientEvent)) {
                opened = new CUevent();
                Cu.check(JCudaDriver.cuIpcOpenEventHandle(opened, Cu.eventHandle(clientEvent)), "cuIpcOpenEventHandle(worker event)");
                Cu.check(JCudaDriver.cuStreamWaitEvent(lane.kernelStream, opened, 0), "cuStreamWaitEvent(worker event)");
                Cu.check(JCudaDriver.cuStreamWaitEvent(lane.dmaStream, opened, 0), "cuStreamWaitEvent(worker event)");
            }
            openedNs = System.nanoTime();
            // GPU time is measured on the DMA stream, the lane's bottleneck: its transfers follow
            // one another there without overlapping, so bytes over summed time is the rate achieved
            Cu.check(JCudaDriver.cuEventRecord(timer[0], lane.dmaStream), "cuEventRecord(start)");
            enqueueDirect(direction, tensors, pieces, lane);
            enqueueStaged(direction, tensors, pieces, lane, lane.inFlight.get() == 0 ? FIRST_BATCH_BYTES : STAGING_HALF_BYTES);
        } catch (RuntimeException e) {
            error = e.getMessage();
        }
        long enqueuedNs = System.nanoTime();
        long bytes = pieces.totalBytes();
        int index = direction.ordinal();
        boolean accepted = error == null;
        // runs on: lmcache-cuda-events (or the closing thread while GpuBackend.close drains the poller)
        lane.inFlight.incrementAndGet();
        EventPoller.Completion done = (ok, failure) -> {
            lane.inFlight.decrementAndGet();
            if (ok && accepted) {
                float[] ms = new float[1];
                if (JCudaDriver.cuEventElapsedTime(ms, timer[0], timer[1]) == 0) {
                    gpuNanos[index].add((long) (ms[0] * 1e6));
                    copiedBytes[index].add(bytes);
                }
            }
            recycle(timer);
            completion.done(ok && accepted, failure);
        };
        byte[] handle = exportEvent(direction, lane, opened, timer[1], done);
        submitTimes.add(direction, SubmitTimes.Phase.OPEN, openedNs - startNs);
        submitTimes.add(direction, SubmitTimes.Phase.ENQUEUE, enqueuedNs - openedNs);
        submitTimes.add(direction, SubmitTimes.Phase.EXPORT, System.nanoTime() - enqueuedNs);
        submitTimes.submitted(direction);
        return new Submitted(handle, accepted, error);
    }

    /** A valid, recorded event with no transfer behind it (the reply to a transfer refused before any copy). */
    public byte[] recordedEvent(Direction direction) {
        Lane lane = direction == Direction.TO_POOL ? store : retrieve;
        synchronized (lane) {
            device.makeCurrent();
            return exportEvent(direction, lane, null, null, (ok, error) -> { });
        }
    }

    /** Pieces larger than a staging half: one DMA call each, straight between the worker's memory and the pool. */
    private void enqueueDirect(Direction direction, DeviceTensors tensors, Pieces pieces, Lane lane) {
        for (int i = 0; i < pieces.count(); i++) {
            long length = pieces.length(i);
            if (!StagedBatch.direct(length, STAGING_HALF_BYTES)) {
                continue;
            }
            CUdeviceptr gpu = tensors.storagePointer(pieces.tensor(i)).withByteOffset(pieces.tensorOffset(i));
            CUdeviceptr host = pool.pointer(pieces.poolOffset(i));
            CUdeviceptr src = direction == Direction.TO_POOL ? gpu : host;
            CUdeviceptr dst = direction == Direction.TO_POOL ? host : gpu;
            Cu.check(JCudaDriver.cuMemcpyAsync(dst, src, length, lane.dmaStream), "cuMemcpyAsync(" + (length >> 10) + " KiB)");
        }
    }

    /** The small pieces, batch by batch through alternating staging halves. */
    private void enqueueStaged(Direction direction, DeviceTensors tensors, Pieces pieces, Lane lane, long firstBatchBytes) {
        long[] bases = tensors.storageAddresses();
        StagedBatch batch = lane.batch;
        int next = 0;
        BatchSizes sizes = BatchSizes.forTransfer(direction, pieces, firstBatchBytes, STAGING_HALF_BYTES);
        while (next < pieces.count()) {
            int half = lane.takeHalf();
            next = batch.fill(pieces, next, bases, direction, lane.stagingAddress[half], STAGING_HALF_BYTES, sizes.next(),
                    pool.regionBytes());
            sizes.staged(batch.stagedBytes());
            if (batch.pieceCount() == 0) {
                lane.takeHalf(); // nothing staged (only large pieces were left): the half stays next
                continue;
            }
            if (direction == Direction.TO_POOL) {
                // gather into the half once its previous batch is out, then DMA it to the pool
                Cu.check(JCudaDriver.cuStreamWaitEvent(lane.kernelStream, lane.drained[half], 0), "cuStreamWaitEvent(drained)");
                launch(lane, batch);
                Cu.check(JCudaDriver.cuEventRecord(lane.filled[half], lane.kernelStream), "cuEventRecord(filled)");
                Cu.check(JCudaDriver.cuStreamWaitEvent(lane.dmaStream, lane.filled[half], 0), "cuStreamWaitEvent(filled)");
                dmaRuns(lane, batch, half, Direction.TO_POOL);
                Cu.check(JCudaDriver.cuEventRecord(lane.drained[half], lane.dmaStream), "cuEventRecord(drained)");
            } else {
                // DMA the pool runs into the half once its previous batch is scattered, then scatter it
                Cu.check(JCudaDriver.cuStreamWaitEvent(lane.dmaStream, lane.drained[half], 0), "cuStreamWaitEvent(drained)");
                dmaRuns(lane, batch, half, Direction.FROM_POOL);
                Cu.check(JCudaDriver.cuEventRecord(lane.filled[half], lane.dmaStream), "cuEventRecord(filled)");
                Cu.check(JCudaDriver.cuStreamWaitEvent(lane.kernelStream, lane.filled[half], 0), "cuStreamWaitEvent(filled)");
                launch(lane, batch);
                Cu.check(JCudaDriver.cuEventRecord(lane.drained[half], lane.kernelStream), "cuEventRecord(drained)");
            }
        }
    }

    private void dmaRuns(Lane lane, StagedBatch batch, int half, Direction direction) {
        for (int run = 0; run < batch.runCount(); run++) {
            CUdeviceptr staged = lane.staging[half].withByteOffset(batch.runStagingOffset(run));
            CUdeviceptr host = pool.pointer(batch.runPoolOffset(run));
            CUdeviceptr src = direction == Direction.TO_POOL ? staged : host;
            CUdeviceptr dst = direction == Direction.TO_POOL ? host : staged;
            Cu.check(JCudaDriver.cuMemcpyAsync(dst, src, batch.runBytes(run), lane.dmaStream), "cuMemcpyAsync(staged run)");
        }
    }

    /** Writes the batch's descriptors into a ring slot and launches the kernel on the lane's kernel stream. */
    private void launch(Lane lane, StagedBatch batch) {
        int n = batch.pieceCount();
        int slot = lane.takeSlot();
        LongBuffer view = lane.hostViews[slot];
        view.clear();
        view.put(batch.descriptors(), 0, 3 * n);
        Pointer parameters = Pointer.to(Pointer.to(lane.deviceViews[slot]), Pointer.to(new int[] {n}));
        Cu.check(JCudaDriver.cuLaunchKernel(kernel, Math.min(KERNEL_BLOCKS, n), 1, 1, KERNEL_THREADS, 1, 1, 0, lane.kernelStream,
                parameters, null), "cuLaunchKernel(copy_pieces, " + n + " pieces)");
        Cu.check(JCudaDriver.cuEventRecord(lane.fences[slot], lane.kernelStream), "cuEventRecord(descriptor fence)");
    }

    /**
     * Joins the lane's other stream into the one its transfers end on (so the event also covers
     * copies enqueued before a failure), records the end timer and the exported event there, and
     * tracks it. A STORE ends on the DMA stream and a RETRIEVE on the kernel stream: joining the
     * other way would make the next STORE's first gather wait for this one's last DMA, an idle gap
     * on the link of one gather per transfer.
     */
    private byte[] exportEvent(Direction direction, Lane lane, CUevent opened, CUevent endTimer, EventPoller.Completion completion) {
        CUstream last = direction == Direction.TO_POOL ? lane.dmaStream : lane.kernelStream;
        CUstream other = direction == Direction.TO_POOL ? lane.kernelStream : lane.dmaStream;
        Cu.check(JCudaDriver.cuEventRecord(lane.join, other), "cuEventRecord(join)");
        Cu.check(JCudaDriver.cuStreamWaitEvent(last, lane.join, 0), "cuStreamWaitEvent(join)");
        if (endTimer != null) {
            Cu.check(JCudaDriver.cuEventRecord(endTimer, last), "cuEventRecord(end)");
        }
        CUevent event = event(EXPORT_FLAGS);
        Cu.check(JCudaDriver.cuEventRecord(event, last), "cuEventRecord(interprocess)");
        CUipcEventHandle handle = new CUipcEventHandle();
        Cu.check(JCudaDriver.cuIpcGetEventHandle(handle, event), "cuIpcGetEventHandle");
        poller.track(device, event, opened == null ? new CUevent[0] : new CUevent[] {opened}, completion);
        return Cu.bytes(handle);
    }

    /** A pair of timing events (start, end), reused across transfers. */
    private CUevent[] timer() {
        synchronized (idleTimers) {
            CUevent[] pair = idleTimers.poll();
            if (pair != null) {
                return pair;
            }
        }
        return new CUevent[] {event(CUevent_flags.CU_EVENT_DEFAULT), event(CUevent_flags.CU_EVENT_DEFAULT)};
    }

    private void recycle(CUevent[] pair) {
        synchronized (idleTimers) {
            idleTimers.push(pair);
        }
    }

    /** GPU time of completed transfers in this direction: from the DMA stream reaching each to its last copy finishing. */
    public long gpuNanos(Direction direction) {
        return gpuNanos[direction.ordinal()].sum();
    }

    /** Bytes of completed transfers in this direction. */
    public long copiedBytes(Direction direction) {
        return copiedBytes[direction.ordinal()].sum();
    }

    SubmitTimes submitTimes() {
        return submitTimes;
    }

    void resetCounters() {
        for (int i = 0; i < 2; i++) {
            gpuNanos[i].reset();
            copiedBytes[i].reset();
        }
    }

    private static boolean isZero(byte[] bytes) {
        for (byte b : bytes) {
            if (b != 0) {
                return false;
            }
        }
        return true;
    }

    @Override
    public void close() {
        device.makeCurrent();
        synchronized (store) {
            store.close();
        }
        synchronized (retrieve) {
            retrieve.close();
        }
        synchronized (idleTimers) {
            for (CUevent[] pair : idleTimers) {
                JCudaDriver.cuEventDestroy(pair[0]);
                JCudaDriver.cuEventDestroy(pair[1]);
            }
            idleTimers.clear();
        }
    }
}
