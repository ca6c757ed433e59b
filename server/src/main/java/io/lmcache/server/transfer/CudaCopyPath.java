package io.lmcache.server.transfer;

import io.lmcache.server.protocol.EventHandle;
import io.lmcache.server.cuda.CopyEngine;
import io.lmcache.server.cuda.CudaDevice;
import io.lmcache.server.cuda.DeviceTensors;
import io.lmcache.server.cuda.LayerEvents;
import io.lmcache.server.cuda.Direction;
import io.lmcache.server.cuda.PoolMemory;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.protocol.Reply;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A GPU worker's path: its tensors opened through CUDA IPC and its GPU's copy engine. The copies
 * are enqueued and the reply carries our event; the completion (publish or unpin, give the lease
 * back) runs when the event fires. The mappings keep the worker's memory alive even if its
 * process dies, so they are always reachable; only the release thread closes them.
 */
public final class CudaCopyPath implements CopyPath {
    private static final Logger LOG = LoggerFactory.getLogger(CudaCopyPath.class);
    /** Can fail once per request while the driver is unwell: rate-limited. */
    private static final RateLimitedLog EVENT_FAILURE_LINES = new RateLimitedLog(LOG, "failure events not recorded", 10);
    private static final RateLimitedLog WARM_FAILURE_LINES = new RateLimitedLog(LOG, "context warm-up launches failed", 10);
    private static final byte[] NO_EVENT = new byte[64];

    private final DeviceTensors tensors;
    /** Where a STORE reads: the worker's tensors; for the GPU warm-up, aliases of a real worker's (or the scratch tensors). */
    private final DeviceTensors storeFrom;
    private final CopyEngine engine;
    /** The layer-wise event pool, made at the first REGISTER_LAYERWISE_IPC_EVENT_POOL (guarded by this); closed with the path. */
    private LayerEvents layerEvents;
    /** Where the pool offsets point: null for the L1 pool (every real registration), scratch memory for the GPU warm-up. */
    private final PoolMemory memory;
    private volatile boolean copied;

    CudaCopyPath(DeviceTensors tensors, CopyEngine engine) {
        this(tensors, tensors, engine, null);
    }

    private CudaCopyPath(DeviceTensors tensors, DeviceTensors storeFrom, CopyEngine engine, PoolMemory memory) {
        this.tensors = tensors;
        this.storeFrom = storeFrom;
        this.engine = engine;
        this.memory = memory;
    }

    /**
     * The GPU warm-up's path (issue 30): the real engine's lanes, kernel and events, between scratch device tensors and
     * scratch pinned memory that stands in for the pool (the warm-up package's GpuScratchWarmup calls it).
     */
    public static CudaCopyPath scratch(DeviceTensors tensors, CopyEngine engine, PoolMemory memory) {
        return new CudaCopyPath(tensors, tensors, engine, memory);
    }

    /**
     * The GPU warm-up's path over a real worker's KV (issue 52): its STOREs read {@code storeFrom} (aliases of the worker's
     * tensors, {@code DeviceTensors#readAliases}) into scratch pinned memory, its RETRIEVEs write only {@code tensors} (scratch
     * device memory): the worker's memory is never written.
     */
    public static CudaCopyPath readingWorker(DeviceTensors storeFrom, DeviceTensors tensors, CopyEngine engine, PoolMemory memory) {
        return new CudaCopyPath(tensors, storeFrom, engine, memory);
    }

    /** The worker's tensors as opened (the GPU warm-up reads them through {@code DeviceTensors#readAliases}). */
    public DeviceTensors tensors() {
        return tensors;
    }

    /** The registered worker's GPU (for the GPU warm-up, which runs once per device). */
    public CudaDevice cudaDevice() {
        return tensors.device();
    }

    /** The GPU's copy engine (the GPU warm-up runs its transfers through it). */
    public CopyEngine engine() {
        return engine;
    }

    @Override
    public synchronized List<byte[]> layerEventHandles() {
        if (layerEvents == null) {
            layerEvents = LayerEvents.create(tensors.device(), LayerEvents.POOL_SIZE);
        }
        return layerEvents.handles();
    }

    @Override
    public Copied copyLayerwise(LayeredSource source, byte[] clientEvent, InstanceContext.Lease lease, Completion done) {
        LayerEvents events;
        synchronized (this) {
            layerEventHandles(); // LMCache's _ensure_session makes the pool too when the worker never asked for it
            events = layerEvents;
        }
        CopyEngine.Feed feed = stream -> source.emit(PieceSink.of(stream::add), index -> stream.endLayerBatch(events, index));
        return submit(Direction.FROM_POOL, feed, clientEvent, lease, done);
    }

    @Override
    public Copied copy(Direction direction, PieceSource source, byte[] clientEvent, InstanceContext.Lease lease, Completion done) {
        CopyEngine.Feed feed = stream -> source.emit(PieceSink.of(stream::add));
        return submit(direction, feed, clientEvent, lease, done);
    }

    private Copied submit(Direction direction, CopyEngine.Feed feed, byte[] clientEvent, InstanceContext.Lease lease, Completion done) {
        if (!copied) {
            copied = true; // once: a volatile read on every later copy
        }
        InstanceContext.Lease owned = lease.handOff();
        CopyEngine.Submitted submitted;
        try {
            // the engine copies the first batches while the source is still planning the later chunks' pieces
            CopyEngine.Done completion = (ok, bytes, error, finishedNs) -> {
                // runs on: lmcache-cuda-events (or the closing thread while shutdown drains the transfers in flight), or
                // inline for a STORE with nothing to copy
                try {
                    done.done(ok, bytes, ok ? null : "failed on the GPU: " + error, finishedNs);
                } finally {
                    owned.close();
                }
            };
            DeviceTensors on = direction == Direction.TO_POOL ? storeFrom : tensors;
            submitted = memory == null ? engine.submit(direction, on, feed, clientEvent, completion)
                    : engine.submit(direction, on, feed, clientEvent, completion, memory);
        } catch (RuntimeException e) {
            // nothing was tracked: the completion will not run, so it runs here, once
            owned.close();
            done.done(false, 0, "failed: " + e, System.nanoTime());
            return new Copied(afterEnqueued(direction, clientEvent.length == EventHandle.TIMELINE_BYTES), false, null);
        }
        return new Copied(submitted.eventHandle(), submitted.accepted(), submitted.accepted() ? null : submitted.error());
    }

    /**
     * The reply's event when the submit threw part way: recorded on the lane, so it also covers copies
     * enqueued before the throw (the worker must not touch its blocks before they finish); the
     * device's complete event when not even that can be recorded.
     */
    private byte[] afterEnqueued(Direction direction, boolean timeline) {
        try {
            return engine.recordedEvent(direction, timeline);
        } catch (RuntimeException e) {
            EVENT_FAILURE_LINES.error("cannot record a failure event on GPU {}: {}", tensors.device().ordinal(), e.getMessage());
            return completedEvent();
        }
    }

    /**
     * The device's recorded, always-complete event (made once, shared by every failure reply): a
     * request refused before any copy has nothing to wait for. 64 zero bytes only when CUDA cannot
     * make even that (the worker's open then fails, but there is nothing valid to send).
     */
    private byte[] completedEvent() {
        try {
            return tensors.device().completedEvent();
        } catch (RuntimeException e) {
            EVENT_FAILURE_LINES.error("cannot record a failure event on GPU {}: {}", tensors.device().ordinal(), e.getMessage());
            return NO_EVENT;
        }
    }

    @Override
    public void warm(Direction direction, long firstPieceBytes, byte[] clientEvent, int chunks) {
        try {
            engine.warm(direction, firstPieceBytes, clientEvent, chunks);
        } catch (RuntimeException e) {
            // only a head start is lost: the transfer that follows runs (and reports) on the same GPU anyway
            WARM_FAILURE_LINES.warn("cannot launch the context warm-up on GPU {}: {}", tensors.device().ordinal(), e.getMessage());
        }
    }

    @Override
    public Reply failure(Direction direction) {
        return new Reply.Transfer(completedEvent(), false);
    }

    @Override
    public String checkAlive() {
        return null;
    }

    @Override
    public void close() {
        try {
            tensors.close();
        } finally {
            synchronized (this) {
                if (layerEvents != null) {
                    layerEvents.close(); // the release thread: after the registration's last transfer
                }
            }
        }
    }

    @Override
    public String kind() {
        return "cuda";
    }

    @Override
    public boolean copied() {
        return copied;
    }

    @Override
    public String device() {
        return "cuda:" + tensors.device().ordinal();
    }
}
