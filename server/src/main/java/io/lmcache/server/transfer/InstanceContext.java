package io.lmcache.server.transfer;

import io.lmcache.server.liveness.EndOfLifeQueue;
import io.lmcache.server.protocol.TensorWrapper;
import java.util.List;

/**
 * One registered worker instance: its geometry (kernel and object groups) and its copy path. Transfers hold a lease while they
 * copy, so UNREGISTER (or a reap) never unmaps memory under a copy: when the context is closed and
 * the last lease is back, the copy path goes on the end-of-life queue (never closed inline: the
 * release thread closes it).
 */
public final class InstanceContext {
    private final long instanceId;
    private final String modelName;
    private final int worldSize;
    private final CacheGeometry geometry;
    private final CopyPath copyPath;
    private final List<TensorWrapper> wrappers;
    private final EndOfLifeQueue endOfLife;
    private int leases;
    private boolean closed;

    public InstanceContext(long instanceId, String modelName, int worldSize, CacheGeometry geometry, CopyPath copyPath,
            List<TensorWrapper> wrappers, EndOfLifeQueue endOfLife) {
        this.instanceId = instanceId;
        this.modelName = modelName;
        this.worldSize = worldSize;
        this.geometry = geometry;
        this.copyPath = copyPath;
        this.wrappers = wrappers;
        this.endOfLife = endOfLife;
    }

    public long instanceId() {
        return instanceId;
    }

    public String modelName() {
        return modelName;
    }

    public int worldSize() {
        return worldSize;
    }

    public CacheGeometry geometry() {
        return geometry;
    }

    public CopyPath copyPath() {
        return copyPath;
    }

    public List<TensorWrapper> wrappers() {
        return wrappers;
    }

    /**
     * One transfer's hold on the context, for try-with-resources. {@link #handOff()} passes it to
     * a copy that outlives the call (the CUDA path): the new lease is returned by the copy's
     * completion, and this one's close does nothing. Used by one thread at a time.
     */
    public final class Lease implements AutoCloseable {
        private boolean held = true;

        private Lease() {}

        public InstanceContext context() {
            return InstanceContext.this;
        }

        /** Moves the hold to a new lease for whoever finishes the transfer. */
        public Lease handOff() {
            if (!held) {
                throw new IllegalStateException("lease of instance " + instanceId + " was already returned or handed off");
            }
            held = false;
            return new Lease();
        }

        @Override
        public void close() {
            if (held) {
                held = false;
                returnLease();
            }
        }
    }

    /** Takes a lease for one transfer; null when the context was already closed. */
    public Lease acquire() {
        synchronized (this) {
            if (closed) {
                return null;
            }
            leases++;
        }
        return new Lease();
    }

    private void returnLease() {
        boolean last;
        synchronized (this) {
            leases--;
            last = closed && leases == 0;
        }
        if (last) {
            enqueueRelease();
        }
    }

    /** Unregisters: the copy path goes to the release thread now, or when the transfers in flight finish. */
    public void close() {
        boolean idle;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            idle = leases == 0;
        }
        if (idle) {
            enqueueRelease();
        }
    }

    private void enqueueRelease() {
        // runs on: lmcache-release-* (or the closing thread once the release thread has closed)
        endOfLife.enqueue(copyPath.kind() + " mappings of instance " + instanceId, copyPath::close);
    }

    public synchronized int leases() {
        return leases;
    }
}
