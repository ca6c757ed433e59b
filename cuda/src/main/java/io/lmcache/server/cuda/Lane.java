package io.lmcache.server.cuda;

import io.lmcache.server.config.Tuning;
import java.lang.foreign.Arena;
import java.nio.ByteOrder;
import java.nio.LongBuffer;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUevent;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;

/**
 * The streams, staging halves and descriptor ring of one direction of a {@link CopyEngine}, and the
 * {@link PieceStream} that cuts its transfers into batches. Used only under its own lock (the
 * engine's submit synchronizes on it), apart from {@link #inFlight}.
 */
final class Lane {
    /**
     * Descriptor slots per lane: one per batch, reused once the GPU has run it. A transfer takes a
     * slot per staging batch (4 for a 128 MiB request), and a submit whose slot is still in use
     * waits for the GPU; 64 slots keep 16 such requests in flight without that wait, in 8 MiB of
     * pinned memory per lane (32 bytes per descriptor: a triple and a {@link HeadTranspose} shape).
     */
    static final int RING_SLOTS = 64;
    static final int SLOT_DESCRIPTORS = 4096;
    static final int DESCRIPTOR_FLAGS = JCudaDriver.CU_MEMHOSTALLOC_DEVICEMAP | JCudaDriver.CU_MEMHOSTALLOC_WRITECOMBINED;
    final CUstream kernelStream = new CUstream();
    final CUstream dmaStream = new CUstream();
    /**
     * Runs only the host function that stamps each transfer's end ({@code Tuning.hostFnWake}), after waiting for that
     * transfer's event: a host function stalls its stream until the driver's thread has run it, and on the copy stream
     * that stall sat between one transfer's last copy and the next one's first (bench/RESULTS.md#gpu-several-requests-in-flight).
     */
    final CUstream watchStream = new CUstream();
    final CUdeviceptr[] staging = new CUdeviceptr[2];
    final long[] stagingAddress = new long[2];
    /** Recorded once a half's contents are consumed (the DMA out, or the scatter), so it may be refilled. */
    final CUevent[] drained = new CUevent[2];
    /** Recorded once a half holds its batch (the gather, or the DMA in). */
    final CUevent[] filled = new CUevent[2];
    /** Joins one stream into the other at the end of each transfer (see {@link CopyEngine}). */
    final CUevent join = new CUevent();
    /** Descriptor slots in mapped, write-combined pinned memory: the CPU writes them, the kernel reads them over PCIe. */
    final Pointer[] hostBuffers = new Pointer[RING_SLOTS];
    final LongBuffer[] hostViews = new LongBuffer[RING_SLOTS];
    final CUdeviceptr[] deviceViews = new CUdeviceptr[RING_SLOTS];
    final CUevent[] fences = new CUevent[RING_SLOTS];
    final boolean[] used = new boolean[RING_SLOTS];
    final StagedBatch batch;
    final PieceStream stream;
    /** The engine's knobs: the staging size, the kernel's blocks, the DMA head. */
    final Tuning tuning;
    /** The smallest piece this direction's DMA head takes ({@link Tuning}: each direction has its own). */
    final long headMinPieceBytes;
    /** Transfers submitted on this lane whose completion has not run yet (decremented on lmcache-cuda-events). */
    final AtomicInteger inFlight = new AtomicInteger();
    /** A context warm-up of this lane waits on the event poller's thread ({@code CopyEngine.warm}): at most one at a time. */
    final AtomicBoolean warmPosted = new AtomicBoolean();
    int nextSlot;
    int nextHalf;

    /** Native argument arrays of {@link #head}; closed with the lane. */
    private final Arena arena = Arena.ofShared();
    /** The driver's batched copy for the head of a transfer that finds the lane idle, on {@link #dmaStream}; null without one (before CUDA 12.8). */
    final BatchCopy head;

    Lane(int priority, Direction direction, int deviceOrdinal, Tuning tuning) {
        this.tuning = tuning;
        this.headMinPieceBytes = direction == Direction.TO_POOL ? tuning.storeDmaHeadMinPieceBytes() : tuning.retrieveDmaHeadMinPieceBytes();
        this.stream = new PieceStream(tuning.stagingHalfBytes(), SLOT_DESCRIPTORS, tuning.batchGrowth());
        this.batch = new StagedBatch(SLOT_DESCRIPTORS, tuning.stageInPoolOrder());
        for (CUstream stream : new CUstream[] {kernelStream, dmaStream, watchStream}) {
            Cu.check(JCudaDriver.cuStreamCreateWithPriority(stream, CUstream_flags.CU_STREAM_NON_BLOCKING, priority),
                    "cuStreamCreateWithPriority");
        }
        head = BatchCopy.forLane(arena, SLOT_DESCRIPTORS, direction, deviceOrdinal, dmaStream);
        for (int half = 0; half < 2; half++) {
            staging[half] = new CUdeviceptr();
            Cu.check(JCudaDriver.cuMemAlloc(staging[half], tuning.stagingHalfBytes()), "cuMemAlloc(staging, "
                    + (tuning.stagingHalfBytes() >> 20) + " MiB)");
            stagingAddress[half] = Cu.address(staging[half]);
            drained[half] = CopyEngine.event(CopyEngine.SYNC_FLAGS);
            filled[half] = CopyEngine.event(CopyEngine.SYNC_FLAGS);
        }
        Cu.check(JCudaDriver.cuEventCreate(join, CopyEngine.SYNC_FLAGS), "cuEventCreate(join)");
        long bytes = 32L * SLOT_DESCRIPTORS; // triples, then (for the transposing kernel) one shape per piece
        for (int slot = 0; slot < RING_SLOTS; slot++) {
            hostBuffers[slot] = new Pointer();
            Cu.check(JCudaDriver.cuMemHostAlloc(hostBuffers[slot], bytes, DESCRIPTOR_FLAGS), "cuMemHostAlloc(descriptors)");
            hostViews[slot] = hostBuffers[slot].getByteBuffer(0, bytes).order(ByteOrder.nativeOrder()).asLongBuffer();
            deviceViews[slot] = new CUdeviceptr();
            Cu.check(JCudaDriver.cuMemHostGetDevicePointer(deviceViews[slot], hostBuffers[slot], 0),
                    "cuMemHostGetDevicePointer(descriptors)");
            fences[slot] = CopyEngine.event(CopyEngine.SYNC_FLAGS);
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
        JCudaDriver.cuStreamSynchronize(watchStream);
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
        JCudaDriver.cuStreamDestroy(watchStream);
        arena.close();
    }
}
