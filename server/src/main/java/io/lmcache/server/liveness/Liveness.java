package io.lmcache.server.liveness;

import io.lmcache.server.peer.PeerConnections;
import io.lmcache.server.peer.PeerId;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.function.LongSupplier;

/**
 * The liveness rules, shared by every target: one {@link Entry} per instance (kept by the target
 * under its own lock) and {@link #staleReason} deciding whether it should go.
 */
public final class Liveness {
    private final LongSupplier clockNs;
    private final PeerConnections connections;
    private final long disconnectGraceNs;

    public Liveness(LongSupplier clockNs, PeerConnections connections, long disconnectGraceNs) {
        this.clockNs = clockNs;
        this.connections = connections;
        this.disconnectGraceNs = disconnectGraceNs;
    }

    /** Per-instance liveness state; guarded by the owning module's lock. */
    public static final class Entry {
        long lastSeenNs;
        boolean pinged;
        PeerId peer;

        public PeerId peer() {
            return peer;
        }

        public boolean pinged() {
            return pinged;
        }

        public long lastSeenNs() {
            return lastSeenNs;
        }
    }

    public long nowNs() {
        return clockNs.getAsLong();
    }

    public Entry newEntry(PeerId peer) {
        Entry entry = new Entry();
        entry.lastSeenNs = nowNs();
        entry.peer = peer;
        return entry;
    }

    /** Traffic (REGISTER, STORE, RETRIEVE, PREPARE, COMMIT): refreshes and follows the worker to its current connection. */
    public void traffic(Entry entry, PeerId peer) {
        entry.lastSeenNs = nowNs();
        if (peer != null) {
            entry.peer = peer;
        }
    }

    /** PING: as traffic, and the instance is now one that heartbeats. */
    public void ping(Entry entry, PeerId peer) {
        traffic(entry, peer);
        entry.pinged = true;
    }

    /** Whether {@code peer}'s connection is known to be closed (false while open or when nothing is known of it). */
    public boolean connectionClosed(PeerId peer) {
        long closedSinceNs = connections.closedSinceNs(peer);
        return closedSinceNs != PeerConnections.OPEN && closedSinceNs != PeerConnections.UNKNOWN;
    }

    /**
     * Null when the instance stays; otherwise why it goes. A closed connection starts the
     * disconnect countdown whatever else is true; a pinged worker goes after the reap timeout of
     * silence; a never-pinged one after the registration grace, but never while its connection is
     * open (LMCache #4715) nor while a disconnect countdown is still running.
     */
    public InstanceLivenessTarget.Reason staleReason(Entry entry, long timeoutNs, long graceNs) {
        long nowNs = nowNs();
        long closedSinceNs = connections.closedSinceNs(entry.peer);
        boolean closed = closedSinceNs != PeerConnections.OPEN && closedSinceNs != PeerConnections.UNKNOWN;
        if (disconnectGraceNs > 0 && closed && nowNs - closedSinceNs >= disconnectGraceNs) {
            return InstanceLivenessTarget.Reason.DISCONNECT;
        }
        long silentNs = nowNs - entry.lastSeenNs;
        if (entry.pinged && silentNs >= timeoutNs) {
            return InstanceLivenessTarget.Reason.SILENCE;
        }
        if (!entry.pinged && silentNs >= graceNs && closedSinceNs != PeerConnections.OPEN && !(closed && disconnectGraceNs > 0)) {
            return InstanceLivenessTarget.Reason.NEVER_PINGED;
        }
        return null;
    }

    /**
     * A target's reap scan: moves every stale instance of {@code live} into {@code reaped} (where
     * it waits for {@code dropInstanceState}) and returns what went and why. The caller holds the
     * lock that guards both maps.
     */
    public <C> List<InstanceLivenessTarget.Reaped> reapStale(Map<Long, C> live, Map<Long, C> reaped, Function<C, Entry> entryOf,
            long timeoutNs, long graceNs) {
        List<InstanceLivenessTarget.Reaped> stale = new ArrayList<>();
        for (Iterator<Map.Entry<Long, C>> it = live.entrySet().iterator(); it.hasNext(); ) {
            Map.Entry<Long, C> instance = it.next();
            Entry entry = entryOf.apply(instance.getValue());
            InstanceLivenessTarget.Reason reason = staleReason(entry, timeoutNs, graceNs);
            if (reason != null) {
                it.remove();
                reaped.put(instance.getKey(), instance.getValue());
                stale.add(new InstanceLivenessTarget.Reaped(instance.getKey(), reason, nowNs() - entry.lastSeenNs));
            }
        }
        return stale;
    }
}
