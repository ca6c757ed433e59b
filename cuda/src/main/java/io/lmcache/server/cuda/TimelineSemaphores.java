package io.lmcache.server.cuda;

import io.lmcache.server.protocol.EventHandle;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.IdentityHashMap;
import java.util.Map;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUipcMemHandle;
import jcuda.driver.CUipcMem_flags;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Isolated IPC's events on one GPU (LMCache's timeline-semaphore backend, {@code LMCache/LMCache:lmcache/v1/platform/
 * devices/cuda/timeline_semaphore_event_ipc.py@bee9b57d}): this server's own buffer of 4096 8-byte slots, allocated and
 * exported once and never freed (a freed address could later yield a byte-identical IPC handle), one slot per recording
 * stream so each slot's values grow in stream order; and the workers' buffers, opened once per handle and kept open for the
 * process lifetime, as the reference does. A worker's event is waited for on the GPU with {@code cuStreamWaitValue64}
 * (GEQ); the server's completion is {@code cuStreamWriteValue64} of the slot's next sequence.
 */
public final class TimelineSemaphores {
    private static final Logger LOG = LoggerFactory.getLogger(TimelineSemaphores.class);
    private static final int WAIT_GEQ = 0x0; // CU_STREAM_WAIT_VALUE_GEQ
    private static final int WRITE_DEFAULT = 0x0; // CU_STREAM_WRITE_VALUE_DEFAULT
    /** Workers' buffers kept open: one per worker process and GPU; beyond this a transfer is refused rather than the map grown. */
    static final int MAX_PEER_BUFFERS = 1024;

    private final CudaDevice device;
    private final CUdeviceptr base;
    private final long baseAddress;
    private final byte[] handle;
    /** Guarded by {@code this}, held through each write's enqueue (two records landing out of order strand the later's waiters). */
    private final Map<CUstream, Integer> slotByStream = new IdentityHashMap<>();
    private final long[] lastSeq = new long[EventHandle.SLOTS];
    private int nextSlot = 1; // slot 0 is the support probe's
    private final Map<String, CUdeviceptr> peers = new HashMap<>();

    /** Allocates, zeroes, exports and probes the buffer (a write then a GEQ wait on slot 0); with the device's context current. */
    TimelineSemaphores(CudaDevice device) {
        this.device = device;
        device.makeCurrent();
        base = new CUdeviceptr();
        Cu.check(JCudaDriver.cuMemAlloc(base, EventHandle.BUFFER_BYTES), "cuMemAlloc(timeline semaphores)");
        CUstream probe = new CUstream();
        try {
            Cu.check(JCudaDriver.cuMemsetD8(base, (byte) 0, EventHandle.BUFFER_BYTES), "cuMemsetD8(timeline semaphores)");
            CUipcMemHandle exported = new CUipcMemHandle();
            Cu.check(JCudaDriver.cuIpcGetMemHandle(exported, base), "cuIpcGetMemHandle(timeline semaphores)");
            handle = Cu.bytes(exported);
            Cu.check(JCudaDriver.cuStreamCreate(probe, CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate(probe)");
            // a real write and wait, not CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS: it reports 0 where the v2 memops work
            Cu.check(JCudaDriver.cuStreamWriteValue64(probe, base, 1, WRITE_DEFAULT), "cuStreamWriteValue64(probe)");
            Cu.check(JCudaDriver.cuStreamWaitValue64(probe, base, 1, WAIT_GEQ), "cuStreamWaitValue64(probe)");
            Cu.check(JCudaDriver.cuStreamSynchronize(probe), "cuStreamSynchronize(probe)");
        } catch (RuntimeException e) {
            JCudaDriver.cuMemFree(base);
            throw e;
        } finally {
            JCudaDriver.cuStreamDestroy(probe);
        }
        baseAddress = Cu.address(base);
        LOG.info("isolated IPC: timeline-semaphore buffer of {} slots on GPU {}", EventHandle.SLOTS, device.ordinal());
    }

    /** The complete event of this buffer (slot 0, sequence 0): a reply with nothing to wait for. */
    public byte[] complete() {
        return EventHandle.Timeline.complete(handle).encode();
    }

    /** Makes {@code stream} wait on the GPU until the worker's slot reaches its sequence; nothing for a sequence of 0. */
    void await(EventHandle.Timeline event, CUstream... streams) {
        if (event.seq() == 0) {
            return;
        }
        CUdeviceptr slot = peer(event.memHandle()).withByteOffset(event.slotOffset());
        for (CUstream stream : streams) {
            Cu.check(JCudaDriver.cuStreamWaitValue64(stream, slot, event.seq(), WAIT_GEQ), "cuStreamWaitValue64(worker event)");
        }
    }

    /** Records the next sequence of {@code stream}'s slot on it and returns the 81-byte payload the worker waits on. */
    synchronized byte[] record(CUstream stream) {
        Integer slot = slotByStream.get(stream);
        if (slot == null) {
            if (nextSlot >= EventHandle.SLOTS) {
                throw new CudaException("the timeline-semaphore buffer on GPU " + device.ordinal() + " is out of slots");
            }
            slot = nextSlot++;
            slotByStream.put(stream, slot);
        }
        long seq = lastSeq[slot] + 1;
        Cu.check(JCudaDriver.cuStreamWriteValue64(stream, base.withByteOffset((long) slot * EventHandle.SLOT_BYTES), seq, WRITE_DEFAULT),
                "cuStreamWriteValue64(record)");
        lastSeq[slot] = seq;
        return new EventHandle.Timeline(handle, (long) slot * EventHandle.SLOT_BYTES, seq).encode();
    }

    /** A worker's buffer, opened at its first event and kept (the worker never frees it either). */
    private synchronized CUdeviceptr peer(byte[] memHandle) {
        String key = HexFormat.of().formatHex(memHandle);
        CUdeviceptr opened = peers.get(key);
        if (opened != null) {
            return opened;
        }
        if (Arrays.equals(memHandle, handle)) {
            return base; // our own handle echoed back: a process cannot open its own export
        }
        if (peers.size() >= MAX_PEER_BUFFERS) {
            throw new CudaException("already " + MAX_PEER_BUFFERS + " workers' semaphore buffers open on GPU " + device.ordinal());
        }
        device.makeCurrent();
        CUdeviceptr pointer = new CUdeviceptr();
        Cu.check(JCudaDriver.cuIpcOpenMemHandle(pointer, Cu.memHandle(memHandle), CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                "cuIpcOpenMemHandle(worker's semaphore buffer)");
        peers.put(key, pointer);
        return pointer;
    }

    long baseAddress() {
        return baseAddress;
    }
}
