package io.lmcache.server.liveness;

import io.lmcache.server.peer.PeerId;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.ToLongFunction;

/**
 * The registered instances of one transfer module and their liveness entries, behind one leaf
 * lock that is never held across mapping, copies, releases or calls out. Reaped instances wait
 * in a second map until the reaper has every target drop them ({@link #takeReaped}). Bounded: at most {@link #MAX_INSTANCES}
 * instances and {@code maxBytes} of what they keep from the wire (live and reaped together); a REGISTER past either is refused
 * by its module ({@link #admits}), since a peer may register under any number of ids and never ping.
 *
 * @param <C> the module's per-instance context
 */
public final class InstanceRegistry<C> {
    /** Far above the workers one server serves (one per GPU or CPU rank of its engines). */
    public static final int MAX_INSTANCES = 4096;

    private final Liveness liveness;
    private final ToLongFunction<C> bytesOf;
    private final long maxBytes;
    private long bytes;
    private final Object lock = new Object();
    private final Map<Long, Slot<C>> live = new HashMap<>();
    private final Map<Long, Slot<C>> reaped = new HashMap<>();

    private record Slot<C>(C context, Liveness.Entry entry) {}

    /** One registered instance as seen by a snapshot: its context and the connection it last used. */
    public record Registered<C>(long instanceId, C context, PeerId peer) {}

    public InstanceRegistry(Liveness liveness) {
        this(liveness, context -> 0, Long.MAX_VALUE);
    }

    /** {@code bytesOf}: what a context keeps from the wire (its model name, ...); {@code maxBytes} of it for all contexts. */
    public InstanceRegistry(Liveness liveness, ToLongFunction<C> bytesOf, long maxBytes) {
        this.liveness = liveness;
        this.bytesOf = bytesOf;
        this.maxBytes = maxBytes;
    }

    /** Whether registering {@code context} under {@code instanceId} fits the caps (replacing a live registration frees its share). */
    public boolean admits(long instanceId, C context) {
        synchronized (lock) {
            Slot<C> old = live.get(instanceId);
            long freed = old == null ? 0 : bytesOf.applyAsLong(old.context());
            return (old != null || live.size() + reaped.size() < MAX_INSTANCES) && bytes - freed + bytesOf.applyAsLong(context) <= maxBytes;
        }
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
            bytes += bytesOf.applyAsLong(context) - (replaced == null ? 0 : bytesOf.applyAsLong(replaced.context()));
            return replaced == null ? null : replaced.context();
        }
    }

    /** Unregisters; returns the context, which the caller releases, or null. */
    public C remove(long instanceId) {
        synchronized (lock) {
            Slot<C> removed = live.remove(instanceId);
            bytes -= removed == null ? 0 : bytesOf.applyAsLong(removed.context());
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
            bytes -= slot == null ? 0 : bytesOf.applyAsLong(slot.context());
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
            bytes = 0;
            return all;
        }
    }
}
