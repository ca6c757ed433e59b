package io.lmcache.server.transfer;

import io.lmcache.server.cuda.CopyEngine;
import io.lmcache.server.cuda.CudaException;
import io.lmcache.server.cuda.DeviceTensors;
import io.lmcache.server.cuda.Direction;
import io.lmcache.server.cuda.Pieces;
import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.protocol.Reply;
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
    private static final byte[] NO_EVENT = new byte[64];
    private static final ThreadLocal<Pieces> PIECES = ThreadLocal.withInitial(Pieces::new);

    private final DeviceTensors tensors;
    private final CopyEngine engine;

    CudaCopyPath(DeviceTensors tensors, CopyEngine engine) {
        this.tensors = tensors;
        this.engine = engine;
    }

    @Override
    public Copied copy(Direction direction, PieceSource source, byte[] clientEvent, InstanceContext.Lease lease, Completion done) {
        Pieces pieces = PIECES.get();
        pieces.clear();
        source.emit(pieces::add);
        long bytes = pieces.totalBytes();
        InstanceContext.Lease owned = null;
        try {
            if (direction == Direction.TO_POOL && pieces.count() == 0) {
                // every chunk is stored already: nothing to wait for, a recorded event answers
                done.done(true, 0, null);
                return new Copied(engine.recordedEvent(direction), true, null);
            }
            owned = lease.handOff();
            InstanceContext.Lease held = owned;
            CopyEngine.Submitted submitted = engine.submit(direction, tensors, pieces, clientEvent, (ok, error) -> {
                // runs on: lmcache-cuda-events (or the closing thread while GpuBackend.close drains the poller)
                try {
                    done.done(ok, bytes, ok ? null : "failed on the GPU: " + error);
                } finally {
                    held.close();
                }
            });
            return new Copied(submitted.eventHandle(), submitted.accepted(), submitted.accepted() ? null : submitted.error());
        } catch (CudaException e) {
            // nothing was tracked: the completion will not run, so it runs here
            if (owned != null) {
                owned.close();
            }
            done.done(false, 0, "failed: " + e.getMessage());
            return new Copied(NO_EVENT, false, null);
        }
    }

    @Override
    public Reply failure(Direction direction) {
        try {
            return new Reply.Transfer(engine.recordedEvent(direction), false);
        } catch (CudaException e) {
            LOG.error("cannot record a failure event on GPU {}: {}", tensors.device().ordinal(), e.getMessage());
            return FailureReplies.transferFailed();
        }
    }

    @Override
    public String checkAlive() {
        return null;
    }

    @Override
    public void close() {
        tensors.close();
    }

    @Override
    public String kind() {
        return "cuda";
    }
}
