package io.lmcache.server.liveness;

import io.lmcache.server.peer.PeerId;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The registered instances of one transfer module and their liveness entries, behind one leaf
 * lock that is never held across mapping, copies, releases or calls out. Reaped instances wait
 * in a second map until the reaper has every target drop them ({@link #takeReaped}).
 *
 * @param <C> the module's per-instance context
 */
public final class InstanceRegistry<C> {
    private final Liveness liveness;
    private final Object lock = new Object();
    private final Map<Long, Slot<C>> live = new HashMap<>();
    private final Map<Long, Slot<C>> reaped = new HashMap<>();

    private record Slot<C>(C context, Liveness.Entry entry) {}

    /** One registered instance as seen by a snapshot: its context and the connection it last used. */
    public record Registered<C>(long instanceId, C context, PeerId peer) {}

    public InstanceRegistry(Liveness liveness) {
        this.liveness = liveness;
    }

    public C get(long instanceId) {
        synchronized (lock) {
            Slot<C> slot = live.get(instanceId);
            return slot == null ? null : slot.context();
        }
    }

    /** Traffic from the instance (REGISTER, STORE, RETRIEVE, PREPARE, COMMIT): refreshes it; returns its context, or null. */
    public C traffic(long instanceId, PeerId peer) {
        synchronized (lock) {
            Slot<C> slot = live.get(instanceId);
            if (slot == null) {
                return null;
            }
            liveness.traffic(slot.entry(), peer);
            return slot.context();
        }
    }

    /** A PING: refreshes and marks the instance as one that heartbeats; never inserts. */
    public boolean ping(long instanceId, PeerId peer) {
        synchronized (lock) {
            Slot<C> slot = live.get(instanceId);
            if (slot != null) {
                liveness.ping(slot.entry(), peer);
            }
            return slot != null;
        }
    }

    /** Registers (with a fresh liveness entry); returns the context it replaced, which the caller releases. */
    public C put(long instanceId, C context, PeerId peer) {
        Slot<C> slot = new Slot<>(context, liveness.newEntry(peer));
        synchronized (lock) {
            Slot<C> replaced = live.put(instanceId, slot);
            return replaced == null ? null : replaced.context();
        }
    }

    /** Unregisters; returns the context, which the caller releases, or null. */
    public C remove(long instanceId) {
        synchronized (lock) {
            Slot<C> removed = live.remove(instanceId);
            return removed == null ? null : removed.context();
        }
    }

    /** Moves every stale instance to the reaped map and says which went and why ({@link Liveness#staleReason}). */
    public List<InstanceLivenessTarget.Reaped> reapStale(long timeoutNs, long graceNs) {
        synchronized (lock) {
            return liveness.reapStale(live, reaped, Slot::entry, timeoutNs, graceNs);
        }
    }

    /** The reaped instance's context, now the caller's to release; null when this registry did not reap it. */
    public C takeReaped(long instanceId) {
        synchronized (lock) {
            Slot<C> slot = reaped.remove(instanceId);
            return slot == null ? null : slot.context();
        }
    }

    public int count() {
        synchronized (lock) {
            return live.size();
        }
    }

    /** The registered instances now (status, sweeps): a copy, so the caller never holds the lock. */
    public List<Registered<C>> snapshot() {
        synchronized (lock) {
            List<Registered<C>> all = new ArrayList<>(live.size());
            for (Map.Entry<Long, Slot<C>> entry : live.entrySet()) {
                all.add(new Registered<>(entry.getKey(), entry.getValue().context(), entry.getValue().entry().peer()));
            }
            return all;
        }
    }

    /** Empties both maps (shutdown); returns every context, live and reaped, for the caller to release. */
    public List<C> drainAll() {
        synchronized (lock) {
            List<C> all = new ArrayList<>(live.size() + reaped.size());
            live.values().forEach(slot -> all.add(slot.context()));
            reaped.values().forEach(slot -> all.add(slot.context()));
            live.clear();
            reaped.clear();
            return all;
        }
    }
}
