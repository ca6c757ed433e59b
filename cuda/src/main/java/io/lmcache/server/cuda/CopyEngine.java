package io.lmcache.server.cuda;

import io.lmcache.server.config.Tuning;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.concurrent.atomic.LongAdder;
import jcuda.Pointer;
import io.lmcache.server.protocol.EventHandle;
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
 * which reach the line rate in both directions at once, and the kernel (on {@link Tuning#copyKernelBlocks}
 * blocks, so the model keeps the other SMs) only touches device memory; it reads its descriptors
 * from mapped pinned host memory, so no descriptor upload queues behind a bulk DMA. Copying over
 * PCIe from the kernel itself was measured at the line rate one way but at about 58 GB/s for a
 * STORE and a RETRIEVE together, against 100 GB/s for DMA.
 *
 * <p>Each transfer first waits (on the GPU, not the CPU) for the worker's event, so a STORE never
 * reads blocks before the forward pass wrote them and a RETRIEVE never overwrites blocks still in
 * use, unless one host query shows the event fired already (a GPU wait on another process's event
 * cost a one-chunk RETRIEVE ~80 µs on the H200); it copies batch by batch while the handler is
 * still emitting the later pieces ({@link PieceStream}); then it records an interprocess event,
 * exports its handle for the reply and hands the completion to the {@link EventPoller}. STOREs and RETRIEVEs have their own lanes (streams,
 * staging, descriptor ring, lock), so a STORE waiting for a descriptor slot never holds up a
 * RETRIEVE; RETRIEVE runs at the highest stream priority.
 *
 * <p>Its knobs ({@code -Dlmcache.cuda.*}) come validated in a {@link Tuning}; why each default was chosen:
 * <ul>
 * <li>{@link Tuning#firstBatchBytes}: the first batch of a transfer that finds its lane idle (then
 * {@link Tuning#batchGrowth} times as much per batch, up to a staging half). With whole halves, a one-chunk request
 * (32 MiB) was one batch: its gather ran before any byte crossed the link. Small first batches let the DMA start after a
 * short gather, the growth keeps the launches few on long transfers. Behind other transfers the link is busy anyway and
 * small batches only add launches (measured: 4 % less with four 128 MiB requests in flight), so those start at a half.
 * <li>{@link Tuning#dmaHeadBytes}: bytes at the head of a transfer that finds its lane idle that the copy engines move
 * straight between the worker's blocks and the pool in batched copies ({@link BatchCopy}), while the GPU switches to this
 * process's context for the first kernel (~140–180 µs after the worker's process ran). Only pieces of
 * {@link Tuning#storeDmaHeadMinPieceBytes} (a STORE's) or {@link Tuning#retrieveDmaHeadMinPieceBytes} (a RETRIEVE's) or more
 * go this way (runs of consecutive blocks, a hybrid model's larger pages; measured on the H200, a 6–16 MiB
 * head of 32 KiB pieces made one-chunk requests slower; the batched copy moved 256 KiB pieces at ~90 % of the line).
 * <li>{@link Tuning#warmContext}: whether a handler launches an empty kernel as it starts a transfer that will begin
 * with the kernel ({@link #warm}).
 * <li>{@link Tuning#queryWorkerEvent}: whether a transfer asks the host first if the worker's event has fired (see
 * {@code Transfer.completeAlready}).
 * <li>{@link Tuning#hostFnWake}: whether a host function stamps each transfer's end and wakes the event poller, so its
 * completion (a STORE's commit) follows the copy within microseconds; off, it is left to the poller's next pass. It runs
 * on the lane's watch stream, behind the transfer's event: on the copy stream itself it stalled the next transfer's
 * copies until the driver's thread had run it (bench/RESULTS.md#gpu-several-requests-in-flight).
 * </ul>
 */
public final class CopyEngine implements AutoCloseable {
    /** Threads per block: a multiple of the kernel's GROUP (256 threads per piece). */
    static final int KERNEL_THREADS = 1024;
    static final int SYNC_FLAGS = CUevent_flags.CU_EVENT_DISABLE_TIMING;
    private static final int EXPORT_FLAGS = CUevent_flags.CU_EVENT_INTERPROCESS | CUevent_flags.CU_EVENT_DISABLE_TIMING;

    /** What {@link #submit} did: the handle to reply with, and whether the copies were enqueued. */
    public record Submitted(byte[] eventHandle, boolean accepted, String error) {}

    private final CudaDevice device;
    private final Tuning tuning;
    private final EventPoller poller;
    private final PinnedPool pool;
    private final CUfunction kernel;
    /** The plain kernel and the transposing one ({@link HeadTranspose#KERNEL}; null when the PTX lacks it), as transfers launch them. */
    private final CUfunction[] kernels;
    private final Lane store;
    private final Lane retrieve;
    /** Where {@link #warm} launches: its own stream, so it takes no lane lock and nothing queues behind it. */
    private final CUstream warmStream = new CUstream();
    private final ArrayDeque<CUevent[]> idleTimers = new ArrayDeque<>();
    private final LongAdder[] gpuNanos = {new LongAdder(), new LongAdder()};
    private final LongAdder[] copiedBytes = {new LongAdder(), new LongAdder()};
    private final SubmitTimes submitTimes = new SubmitTimes();
    /** Workers' events opened on the poller's thread while their handlers plan ({@link #warm}). */
    private final OpenedAhead<CUevent> openedAhead = new OpenedAhead<>(new OpenedAhead.Driver<>() {
        @Override
        public CUevent open(byte[] handle) {
            device.makeCurrent();
            CUevent event = new CUevent();
            Cu.check(JCudaDriver.cuIpcOpenEventHandle(event, Cu.eventHandle(handle)), "cuIpcOpenEventHandle(worker event, ahead)");
            return event;
        }

        @Override
        public void destroy(CUevent event) {
            device.makeCurrent();
            JCudaDriver.cuEventDestroy(event);
        }
    }, System::nanoTime);

    CopyEngine(CudaDevice device, EventPoller poller, PinnedPool pool, Tuning tuning) {
        this.device = device;
        this.tuning = tuning;
        this.poller = poller;
        this.pool = pool;
        CUmodule module = new CUmodule();
        Cu.check(JCudaDriver.cuModuleLoadData(module, ptx()), "cuModuleLoadData(copy_pieces)");
        kernel = new CUfunction();
        Cu.check(JCudaDriver.cuModuleGetFunction(kernel, module, "copy_pieces"), "cuModuleGetFunction(copy_pieces)");
        CUfunction transposing = null;
        if (HeadTranspose.kernelInPtx()) {
            // the layout detector made head-major layouts token-major because the PTX declares the entry: it must load
            transposing = new CUfunction();
            Cu.check(JCudaDriver.cuModuleGetFunction(transposing, module, HeadTranspose.KERNEL),
                    "cuModuleGetFunction(" + HeadTranspose.KERNEL + ")");
        }
        kernels = new CUfunction[] {kernel, transposing};
        int[] least = new int[1];
        int[] greatest = new int[1];
        Cu.check(JCudaDriver.cuCtxGetStreamPriorityRange(least, greatest), "cuCtxGetStreamPriorityRange");
        store = new Lane(least[0], Direction.TO_POOL, device.ordinal(), tuning);
        retrieve = new Lane(greatest[0], Direction.FROM_POOL, device.ordinal(), tuning);
        Cu.check(JCudaDriver.cuStreamCreate(warmStream, CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate(warm)");
    }

    static CUevent event(int flags) {
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
     * Called by a handler as it starts a transfer, before it plans, with the length of the transfer's first piece: if the
     * lane is idle and that piece will go through the gather/scatter kernel (too small for the DMA head), launches the
     * kernel with no pieces (it returns at once) so the GPU switches to this process's context now. Right after the
     * worker's process used the GPU, a transfer's first kernel waited ~140–180 µs for that switch on the H200, in
     * series with a lone request; launched here, the switch overlaps the handler's planning. Measured there
     * (bench/RESULTS.md#gpu-one-request-in-flight): transfers of scattered blocks gained up to 4 % of the line rate on
     * average, but warming every transfer made those of consecutive blocks slower (their DMA head needs no kernel; the
     * launch itself took ~40 µs of the handler's CPU), so only the former warm, and the launch is posted to the event
     * poller's thread, not made here. With transfers in flight the lane's kernels keep the context. Before that, for a
     * transfer of {@code chunks} chunks, the open of the worker's event ({@link #openAhead}; the order measured). Any thread;
     * takes no lane lock.
     */
    public void warm(Direction direction, long firstPieceBytes, byte[] clientEvent, int chunks) {
        Lane lane = direction == Direction.TO_POOL ? store : retrieve;
        openAhead(lane, clientEvent, chunks);
        boolean headStarts = lane.head != null && tuning.dmaHeadBytes() > 0 && firstPieceBytes >= lane.headMinPieceBytes;
        if (tuning.warmContext() && !headStarts && lane.inFlight.get() == 0 && lane.warmPosted.compareAndSet(false, true)) {
            poller.runSoon(() -> launchWarm(lane, direction));
        }
    }

    /**
     * Posts the open of the worker's event to the poller's thread when the lane is idle (a request alone in flight waits for
     * the open; behind other transfers it is hidden anyway) and the transfer spans {@link Tuning#openEventAheadChunks} chunks
     * or more, so it overlaps the handler's planning ({@link OpenedAhead}). A shorter plan does not cover the poller's wake-up
     * and the open: one- and four-chunk requests gained nothing, and on a slow host a one-chunk STORE of scattered blocks lost
     * (bench/RESULTS.md#gpu-hybrid-models).
     */
    private void openAhead(Lane lane, byte[] clientEvent, int chunks) {
        if (lane.inFlight.get() > 0 || !OpenedAhead.applies(tuning.openEventAheadChunks(), chunks, clientEvent)) {
            return;
        }
        Runnable open = openedAhead.post(clientEvent);
        if (open != null) {
            poller.runSoon(open);
        }
    }

    /**
     * Runs on: lmcache-cuda-events. The empty launch itself: 40–60 µs of CPU in the JNI and the driver (H200,
     * bench/RESULTS.md#gpu-hybrid-models), which on the handler's thread were in series with its planning (a Qwen-like
     * one-chunk STORE planned in 55 µs with it, ~15 without); here they overlap it. Skipped when the lane's transfer
     * started meanwhile (its own kernel switches the context).
     */
    private void launchWarm(Lane lane, Direction direction) {
        lane.warmPosted.set(false);
        if (lane.inFlight.get() > 0) {
            return;
        }
        device.makeCurrent();
        // the descriptor pointer is never read with no pieces: any device address serves
        Pointer parameters = Pointer.to(Pointer.to(lane.deviceViews[0]), Pointer.to(new int[] {0}));
        Cu.check(JCudaDriver.cuLaunchKernel(kernel, 1, 1, 1, 32, 1, 1, 0, warmStream, parameters, null), "cuLaunchKernel(warm)");
        submitTimes.warmed(direction);
    }

    /** Emits one transfer's pieces, in order, into the engine, which copies the first batches while later ones are planned. */
    @FunctionalInterface
    public interface Feed {
        void emit(PieceStream stream);
    }

    /** How a submitted transfer ended: ok or not, the bytes of the pieces it was fed, and why not. */
    @FunctionalInterface
    public interface Done {
        /** {@code finishedNs}: when the GPU reached the transfer's end (see {@link EventPoller.Completion}). */
        void done(boolean ok, long bytes, String error, long finishedNs);
    }

    /**
     * Enqueues one transfer and returns the event handle to reply with. When it is accepted the
     * completion runs once the copies finish (ok or not); when it is not, nothing of it runs on the
     * GPU after the returned (valid, recorded) event, and the completion runs with {@code false}
     * once that event fires. A STORE whose feed emits no piece (every chunk stored already) touches
     * nothing on the GPU: its reply is a recorded event and its completion runs before this returns.
     */
    public Submitted submit(Direction direction, DeviceTensors tensors, Feed feed, byte[] clientEvent, Done completion) {
        return submit(direction, tensors, feed, clientEvent, completion, pool);
    }

    /**
     * As {@link #submit(Direction, DeviceTensors, Feed, byte[], Done)}, with the pool offsets in {@code memory} instead of
     * the L1 pool: the GPU warm-up's transfers between scratch device memory and scratch pinned memory (issue 30), which run
     * the same lanes, batches, kernel, events and completions. Transfers on memory other than the pool are left out of the
     * GPU time, bytes and submit-time counters (what /metrics and /status report are the real requests').
     */
    public Submitted submit(Direction direction, DeviceTensors tensors, Feed feed, byte[] clientEvent, Done completion, PoolMemory memory) {
        Lane lane = direction == Direction.TO_POOL ? store : retrieve;
        synchronized (lane) {
            device.makeCurrent();
            return submit(direction, lane, tensors, feed, clientEvent, completion, memory);
        }
    }

    private Submitted submit(Direction direction, Lane lane, DeviceTensors tensors, Feed feed, byte[] clientEvent,
            Done completion, PoolMemory memory) {
        long startNs = System.nanoTime();
        boolean counted = memory == pool;
        boolean timeline = clientEvent.length == EventHandle.TIMELINE_BYTES; // classified (and refused when malformed) by the handler
        Transfer transfer = new Transfer(direction, lane, tensors, memory, kernels, new WorkerEvent(clientEvent, openedAhead), timer());
        String error = null;
        boolean nothingToStore = false;
        try {
            boolean idle = lane.inFlight.get() == 0;
            transfer.headBytesLeft = idle && lane.head != null ? tuning.dmaHeadBytes() : 0;
            lane.stream.begin(idle ? tuning.firstBatchBytes() : tuning.stagingHalfBytes(), transfer);
            feed.emit(lane.stream);
            lane.stream.finish();
            nothingToStore = !transfer.started && direction == Direction.TO_POOL;
            if (!nothingToStore) {
                transfer.start(); // a RETRIEVE of nothing still waits for the worker's event, as every transfer does
            }
        } catch (RuntimeException e) {
            error = e.getMessage() != null ? e.getMessage() : e.toString(); // the feed (the handler's planning) throws too
        }
        if (nothingToStore) {
            recycle(transfer.timer);
            byte[] handle = exportEvent(direction, lane, null, null, (ok, failure, atNs) -> { }, counted, timeline);
            completion.done(true, 0, null, System.nanoTime());
            return new Submitted(handle, true, null);
        }
        long enqueuedNs = System.nanoTime();
        long bytes = lane.stream.pieces().totalBytes();
        int index = direction.ordinal();
        boolean accepted = error == null;
        CUevent[] timer = transfer.timer;
        boolean timed = transfer.started;
        // runs on: lmcache-cuda-events (or the closing thread while GpuBackend.close drains the poller)
        lane.inFlight.incrementAndGet();
        EventPoller.Completion done = (ok, failure, finishedNs) -> {
            lane.inFlight.decrementAndGet();
            if (ok && accepted && timed && counted) {
                float[] ms = new float[1];
                if (JCudaDriver.cuEventElapsedTime(ms, timer[0], timer[1]) == 0) {
                    gpuNanos[index].add((long) (ms[0] * 1e6));
                    copiedBytes[index].add(bytes);
                }
            }
            recycle(timer);
            completion.done(ok && accepted, bytes, failure, finishedNs);
        };
        byte[] handle;
        try {
            // the warm-up's scratch transfers (not counted) export nothing: nobody opens their event, and interprocess
            // events are a bounded driver resource that its hundreds of rounds would hold for their keep-alive
            handle = exportEvent(direction, lane, transfer.opened, timed ? timer[1] : null, done, counted, timeline);
        } catch (RuntimeException e) {
            lane.inFlight.decrementAndGet(); // nothing is tracked: the completion will not run
            recycle(timer);
            throw e;
        }
        if (counted) {
            submitTimes.add(direction, SubmitTimes.Phase.OPEN, transfer.openNs);
            submitTimes.add(direction, SubmitTimes.Phase.ENQUEUE, enqueuedNs - startNs - transfer.openNs);
            submitTimes.add(direction, SubmitTimes.Phase.EXPORT, System.nanoTime() - enqueuedNs);
            submitTimes.add(direction, SubmitTimes.Phase.FIRST_COPY, (transfer.firstCopyNs == 0 ? enqueuedNs : transfer.firstCopyNs) - startNs);
            submitTimes.submitted(direction, transfer.headBytesCopied, transfer.openedAhead);
        }
        return new Submitted(handle, accepted, error);
    }

    /** A valid, recorded event with no transfer behind it (the reply to a transfer refused before any copy). */
    public byte[] recordedEvent(Direction direction) {
        return recordedEvent(direction, false);
    }

    /** As {@link #recordedEvent(Direction)}, as a timeline-semaphore payload when {@code timeline} (an isolated-IPC request's). */
    public byte[] recordedEvent(Direction direction, boolean timeline) {
        Lane lane = direction == Direction.TO_POOL ? store : retrieve;
        synchronized (lane) {
            device.makeCurrent();
            return exportEvent(direction, lane, null, null, (ok, error, atNs) -> { }, true, timeline);
        }
    }

    /**
     * Joins the lane's other stream into the one its transfers end on (so the event also covers
     * copies enqueued before a failure), records the end timer and the exported event there, and
     * tracks it. A STORE ends on the DMA stream and a RETRIEVE on the kernel stream: joining the
     * other way would make the next STORE's first gather wait for this one's last DMA, an idle gap
     * on the link of one gather per transfer.
     */
    private byte[] exportEvent(Direction direction, Lane lane, CUevent opened, CUevent endTimer, EventPoller.Completion completion,
            boolean export, boolean timeline) {
        CUstream last = direction == Direction.TO_POOL ? lane.dmaStream : lane.kernelStream;
        CUstream other = direction == Direction.TO_POOL ? lane.kernelStream : lane.dmaStream;
        Cu.check(JCudaDriver.cuEventRecord(lane.join, other), "cuEventRecord(join)");
        Cu.check(JCudaDriver.cuStreamWaitEvent(last, lane.join, 0), "cuStreamWaitEvent(join)");
        if (endTimer != null) {
            Cu.check(JCudaDriver.cuEventRecord(endTimer, last), "cuEventRecord(end)");
        }
        // an isolated-IPC reply carries the semaphore write instead: the event only tells the poller when the copies ended
        boolean exportCudaEvent = export && !timeline;
        CUevent event = event(exportCudaEvent ? EXPORT_FLAGS : CUevent_flags.CU_EVENT_DISABLE_TIMING);
        Cu.check(JCudaDriver.cuEventRecord(event, last), "cuEventRecord(interprocess)");
        CUipcEventHandle handle = new CUipcEventHandle();
        byte[] reply;
        if (timeline) {
            reply = device.semaphores().record(last);
        } else {
            if (exportCudaEvent) {
                Cu.check(JCudaDriver.cuIpcGetEventHandle(handle, event), "cuIpcGetEventHandle");
            }
            reply = Cu.bytes(handle);
        }
        EventPoller.Reached reached = null;
        if (tuning.hostFnWake() && endTimer != null) {
            // on the lane's watch stream, not on `last`: the next transfer's copies must not wait for the host function
            reached = new EventPoller.Reached();
            reached = poller.watchAfter(event, lane.watchStream, reached) ? reached : null;
        }
        poller.track(device, event, opened == null ? new CUevent[0] : new CUevent[] {opened}, completion, reached);
        return reply;
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

    /**
     * GPU time of completed transfers in this direction: from the DMA stream reaching each (after the worker's event,
     * when the streams wait for it) to its last copy finishing. When the streams do not wait, a STORE's time includes the
     * GPU switching to this process's context for its first gather (~140–180 µs right after the worker's process ran).
     */
    public long gpuNanos(Direction direction) {
        return gpuNanos[direction.ordinal()].sum();
    }

    /** Bytes of completed transfers in this direction. */
    public long copiedBytes(Direction direction) {
        return copiedBytes[direction.ordinal()].sum();
    }

    /** Device memory this engine allocated: two lanes of two staging halves (what /status accounts per GPU). */
    long deviceBytes() {
        return 4 * tuning.stagingHalfBytes();
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

    @Override
    public void close() {
        device.makeCurrent();
        synchronized (store) {
            store.close();
        }
        synchronized (retrieve) {
            retrieve.close();
        }
        JCudaDriver.cuStreamSynchronize(warmStream);
        JCudaDriver.cuStreamDestroy(warmStream);
        openedAhead.close();
        synchronized (idleTimers) {
            for (CUevent[] pair : idleTimers) {
                JCudaDriver.cuEventDestroy(pair[0]);
                JCudaDriver.cuEventDestroy(pair[1]);
            }
            idleTimers.clear();
        }
    }
}
