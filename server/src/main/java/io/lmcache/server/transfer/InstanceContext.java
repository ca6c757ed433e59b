package io.lmcache.server.transfer;

import io.lmcache.server.liveness.Liveness;
import io.lmcache.server.loop.PeerId;
import io.lmcache.server.protocol.TensorWrapper;
import java.util.List;

/**
 * One registered worker instance: its layout and mapped tensors. Transfers hold a lease while they
 * copy, so UNREGISTER (or a reap) never unmaps memory under a copy: the mapping goes when the last
 * lease is returned.
 */
public final class InstanceContext {
    private final long instanceId;
    private final String modelName;
    private final int worldSize;
    private final KvLayout layout;
    private final KvTensors tensors;
    private final List<TensorWrapper> wrappers;
    private final PeerId peer;
    private final Liveness.Entry liveness;
    private int leases;
    private boolean closed;

    public InstanceContext(long instanceId, String modelName, int worldSize, KvLayout layout, KvTensors tensors,
            List<TensorWrapper> wrappers, PeerId peer, Liveness.Entry liveness) {
        this.instanceId = instanceId;
        this.modelName = modelName;
        this.worldSize = worldSize;
        this.layout = layout;
        this.tensors = tensors;
        this.wrappers = wrappers;
        this.peer = peer;
        this.liveness = liveness;
    }

    /** Liveness state; guarded by the owning module's lock. */
    public Liveness.Entry liveness() {
        return liveness;
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

    public KvLayout layout() {
        return layout;
    }

    public KvTensors tensors() {
        return tensors;
    }

    public List<TensorWrapper> wrappers() {
        return wrappers;
    }

    public PeerId peer() {
        return peer;
    }

    /** Takes a lease for one transfer; false when the context was already closed. */
    public synchronized boolean acquire() {
        if (closed) {
            return false;
        }
        leases++;
        return true;
    }

    public void release() {
        boolean unmap;
        synchronized (this) {
            leases--;
            unmap = closed && leases == 0;
        }
        if (unmap) {
            tensors.close();
        }
    }

    /** Unregisters: the tensors are unmapped now, or when the transfers in flight finish. */
    public void close() {
        boolean unmap;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            unmap = leases == 0;
        }
        if (unmap) {
            tensors.close();
        }
    }

    public synchronized boolean isClosed() {
        return closed;
    }
}
