package io.lmcache.server.cuda;

import java.nio.LongBuffer;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import io.lmcache.server.protocol.EventHandle;
import jcuda.driver.CUevent;
import jcuda.driver.CUfunction;
import jcuda.driver.CUresult;
import jcuda.driver.CUstream;
import jcuda.driver.JCudaDriver;

/**
 * One submit's GPU side (a {@link CopyEngine} makes one per transfer, under the lane's lock), fed
 * batch by batch by the lane's {@link PieceStream}. It starts at its first copy: takes the worker's
 * event as the event poller opened it while the handler planned ({@link OpenedAhead}) or opens it, has the streams wait
 * for it unless it fired already, and starts the GPU timer there, so a
 * STORE with nothing to copy touches nothing. On an idle lane the first batches (up to
 * {@code Tuning.dmaHeadBytes}) go as batched copies straight between the worker's blocks and
 * the pool; after that a STORE gathers each batch into a staging half once that half's previous
 * batch is out, then DMAs it to the pool, and a RETRIEVE DMAs the pool runs into the half once its
 * previous batch is scattered, then scatters it.
 */
final class Transfer implements PieceStream.Target {
    private final Direction direction;
    private final Lane lane;
    private final DeviceTensors tensors;
    private final long[] bases;
    private final byte[] clientEvent;
    final CUevent[] timer;
    private final PoolMemory pool;
    private final CUfunction kernel;
    /** {@link HeadTranspose#KERNEL}; null when the loaded PTX lacks it (then no layout emits head-major pieces). */
    private final CUfunction transposing;
    /** Where the worker's event may wait, opened while the handler planned ({@link CopyEngine#warm}). */
    private final OpenedAhead<CUevent> ahead;
    CUevent opened;
    /** Whether {@link #opened} was opened ahead (counted in /status). */
    boolean openedAhead;
    boolean started;
    long openNs;
    long firstCopyNs;
    /** What is left of the head that goes by batched copies (see {@code Tuning.dmaHeadBytes}). */
    long headBytesLeft;
    /** What the head moved (for /status: whether runs of consecutive blocks took the batched copies). */
    long headBytesCopied;

    Transfer(Direction direction, Lane lane, DeviceTensors tensors, PoolMemory pool, CUfunction[] kernels, WorkerEvent workerEvent,
            CUevent[] timer) {
        this.ahead = workerEvent.ahead();
        this.direction = direction;
        this.pool = pool;
        this.kernel = kernels[0];
        this.transposing = kernels[1];
        this.lane = lane;
        this.tensors = tensors;
        this.bases = tensors.storageAddresses();
        this.clientEvent = workerEvent.handle();
        this.timer = timer;
    }

    void start() {
        if (started) {
            return;
        }
        started = true;
        long startNs = System.nanoTime();
        if (EventHandle.classify(clientEvent) instanceof EventHandle.Timeline timeline) {
            // isolated IPC: the worker's slot must reach its sequence before either stream touches its blocks
            tensors.device().semaphores().await(timeline, lane.kernelStream, lane.dmaStream);
        } else if (!isZero(clientEvent)) {
            CUevent event = ahead.take(clientEvent);
            if (event == null) {
                event = new CUevent();
                Cu.check(JCudaDriver.cuIpcOpenEventHandle(event, Cu.eventHandle(clientEvent)), "cuIpcOpenEventHandle(worker event)");
            } else {
                openedAhead = true;
            }
            opened = event; // from here on the poller destroys it with the transfer's event
            if (!completeAlready(opened)) {
                Cu.check(JCudaDriver.cuStreamWaitEvent(lane.kernelStream, opened, 0), "cuStreamWaitEvent(worker event)");
                Cu.check(JCudaDriver.cuStreamWaitEvent(lane.dmaStream, opened, 0), "cuStreamWaitEvent(worker event)");
            }
        }
        // GPU time is measured on the DMA stream, the lane's bottleneck: its transfers follow
        // one another there without overlapping, so bytes over summed time is the rate achieved
        Cu.check(JCudaDriver.cuEventRecord(timer[0], lane.dmaStream), "cuEventRecord(start)");
        openNs = System.nanoTime() - startNs;
    }

    /**
     * Whether the worker's event has fired already (its work before the record is done), so the streams need not
     * wait for it. The query is one host call; with {@code -Dlmcache.cuda.queryWorkerEvent=false} the streams always
     * wait on the GPU, as LMCache's server does.
     */
    private boolean completeAlready(CUevent worker) {
        if (!lane.tuning.queryWorkerEvent()) {
            return false;
        }
        int result = JCudaDriver.cuEventQuery(worker);
        if (result == CUresult.CUDA_SUCCESS) {
            return true;
        }
        if (result != CUresult.CUDA_ERROR_NOT_READY) {
            Cu.check(result, "cuEventQuery(worker event)");
        }
        return false;
    }

    /** A piece larger than a staging half: one DMA call, straight between the worker's memory and the pool. */
    @Override
    public void direct(Pieces pieces, int i) {
        if (pieces.shape(i) != 0) {
            throw new CudaException("a head-major piece cannot go by DMA: only the kernel transposes it"); // PieceStream cuts them
        }
        start();
        long length = pieces.length(i);
        CUdeviceptr gpu = tensors.storagePointer(pieces.tensor(i)).withByteOffset(pieces.tensorOffset(i));
        CUdeviceptr host = pool.pointer(pieces.poolOffset(i));
        CUdeviceptr src = direction == Direction.TO_POOL ? gpu : host;
        CUdeviceptr dst = direction == Direction.TO_POOL ? host : gpu;
        Cu.check(JCudaDriver.cuMemcpyAsync(dst, src, length, lane.dmaStream), "cuMemcpyAsync(" + (length >> 10) + " KiB)");
        copyEnqueued();
    }

    @Override
    public int batch(Pieces pieces, int from, long budgetBytes) {
        start();
        if (headBytesLeft > 0 && pieces.length(from) >= lane.headMinPieceBytes && pieces.shape(from) == 0) {
            return head(pieces, from, budgetBytes);
        }
        StagedBatch batch = lane.batch;
        int half = lane.takeHalf();
        StagedBatch.Buffer staging = new StagedBatch.Buffer(lane.stagingAddress[half], lane.tuning.stagingHalfBytes());
        int next = batch.fill(pieces, from, bases, direction, staging, budgetBytes, pool.regionBytes());
        if (batch.pieceCount() == 0) {
            lane.takeHalf(); // nothing staged (only large pieces were left): the half stays next
            return next;
        }
        if (direction == Direction.TO_POOL) {
            Cu.check(JCudaDriver.cuStreamWaitEvent(lane.kernelStream, lane.drained[half], 0), "cuStreamWaitEvent(drained)");
            launch(lane, batch);
            Cu.check(JCudaDriver.cuEventRecord(lane.filled[half], lane.kernelStream), "cuEventRecord(filled)");
            Cu.check(JCudaDriver.cuStreamWaitEvent(lane.dmaStream, lane.filled[half], 0), "cuStreamWaitEvent(filled)");
            dmaRuns(lane, batch, half, Direction.TO_POOL);
            Cu.check(JCudaDriver.cuEventRecord(lane.drained[half], lane.dmaStream), "cuEventRecord(drained)");
        } else {
            Cu.check(JCudaDriver.cuStreamWaitEvent(lane.dmaStream, lane.drained[half], 0), "cuStreamWaitEvent(drained)");
            dmaRuns(lane, batch, half, Direction.FROM_POOL);
            Cu.check(JCudaDriver.cuEventRecord(lane.filled[half], lane.dmaStream), "cuEventRecord(filled)");
            Cu.check(JCudaDriver.cuStreamWaitEvent(lane.kernelStream, lane.filled[half], 0), "cuStreamWaitEvent(filled)");
            launch(lane, batch);
            Cu.check(JCudaDriver.cuEventRecord(lane.drained[half], lane.kernelStream), "cuEventRecord(drained)");
        }
        copyEnqueued();
        return next;
    }

    /**
     * A layer batch's end: both streams' copies so far joined into the one the direction ends on, then the pool event recorded
     * there. Starts the transfer first, so even a batch with nothing to copy waits for the worker's event.
     */
    @Override
    public void record(LayerEvents events, int index) {
        start();
        CUstream last = direction == Direction.TO_POOL ? lane.dmaStream : lane.kernelStream;
        CUstream other = direction == Direction.TO_POOL ? lane.kernelStream : lane.dmaStream;
        Cu.check(JCudaDriver.cuEventRecord(lane.join, other), "cuEventRecord(join)");
        Cu.check(JCudaDriver.cuStreamWaitEvent(last, lane.join, 0), "cuStreamWaitEvent(join)");
        Cu.check(JCudaDriver.cuEventRecord(events.event(index), last), "cuEventRecord(layer event " + index + ")");
    }

    /** One batch of the head: each piece a copy of its own, straight between the worker's block and the pool. */
    private int head(Pieces pieces, int from, long budgetBytes) {
        BatchCopy copies = lane.head;
        copies.clear();
        long bytes = 0;
        int i = from;
        for (; i < pieces.count() && copies.count() < copies.maxCopies(); i++) {
            long length = pieces.length(i);
            if (StagedBatch.direct(length, lane.tuning.stagingHalfBytes())) {
                continue; // direct() sent it when it arrived
            }
            if (length < lane.headMinPieceBytes || (copies.count() > 0 && bytes + length > budgetBytes)
                    || pieces.shape(i) != 0) {
                // a small piece goes with the staged batches (one copy each is slow for it), and so does a head-major one
                // (a copy cannot transpose it); the batch always moves on: it starts at a large plain piece, or at a
                // direct one skipped above
                break;
            }
            long gpu = bases[pieces.tensor(i)] + pieces.tensorOffset(i);
            long host = pool.address(pieces.poolOffset(i));
            copies.add(direction == Direction.TO_POOL ? host : gpu, direction == Direction.TO_POOL ? gpu : host, length);
            bytes += length;
        }
        if (copies.count() > 0) {
            copies.enqueue();
            copyEnqueued();
        }
        headBytesLeft -= bytes;
        headBytesCopied += bytes;
        return i;
    }

    private void copyEnqueued() {
        if (firstCopyNs == 0) {
            firstCopyNs = System.nanoTime();
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

    /**
     * Writes the batch's descriptors into a ring slot and launches the kernel on the lane's kernel stream: the plain one
     * ({@code copy_pieces}, triples), or for a batch with head-major pieces the transposing one (triples, then each piece's
     * shape, and whether it copies into the staging buffer).
     */
    private void launch(Lane lane, StagedBatch batch) {
        int n = batch.pieceCount();
        boolean transposes = batch.transposes();
        if (transposes && transposing == null) {
            throw new CudaException("the loaded copy_pieces.ptx has no " + HeadTranspose.KERNEL + ": head-major pieces cannot be copied");
        }
        int slot = lane.takeSlot();
        LongBuffer view = lane.hostViews[slot];
        view.clear();
        view.put(batch.descriptors(), 0, 3 * n);
        Pointer parameters;
        if (transposes) {
            view.put(batch.shapes(), 0, n);
            int toObject = direction == Direction.TO_POOL ? 1 : 0;
            parameters = Pointer.to(Pointer.to(lane.deviceViews[slot]), Pointer.to(new int[] {n}), Pointer.to(new int[] {toObject}));
        } else {
            parameters = Pointer.to(Pointer.to(lane.deviceViews[slot]), Pointer.to(new int[] {n}));
        }
        Cu.check(JCudaDriver.cuLaunchKernel(transposes ? transposing : kernel, Math.min(lane.tuning.copyKernelBlocks(), n), 1, 1,
                CopyEngine.KERNEL_THREADS, 1, 1, 0, lane.kernelStream, parameters, null),
                "cuLaunchKernel(" + (transposes ? HeadTranspose.KERNEL : "copy_pieces") + ", " + n + " pieces)");
        Cu.check(JCudaDriver.cuEventRecord(lane.fences[slot], lane.kernelStream), "cuEventRecord(descriptor fence)");
    }

    private static boolean isZero(byte[] bytes) {
        for (byte b : bytes) {
            if (b != 0) {
                return false;
            }
        }
        return true;
    }
}
