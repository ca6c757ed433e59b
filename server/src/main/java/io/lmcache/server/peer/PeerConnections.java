package io.lmcache.server.peer;

import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * Which client connections are open: the request loop reports each peer's TCP address (from
 * ZeroMQ's per-connection metadata), a socket monitor reports connections accepted and closed.
 * The reaper asks whether a worker's connection is still open (then it is alive even if it never
 * pinged, LMCache #4715) or since when it has been closed (then it is reclaimed after the
 * disconnect grace). Entries of closed connections are forgotten after {@code retainNs}.
 */
public final class PeerConnections {
    /** A connection we cannot tell anything about (no metadata seen). */
    public static final long UNKNOWN = Long.MIN_VALUE;
    /** {@link #closedSinceNs} of a connection that is open. */
    public static final long OPEN = -1;
    private static final int MAX_CLOSED = 100_000;

    private final LongSupplier clockNs;
    private final long retainNs;
    private final Map<PeerId, String> addressOf = new HashMap<>();
    private final Map<String, Long> closedAtNs = new HashMap<>();
    private final Map<String, Boolean> open = new HashMap<>();
    /** The server's own health-probe connection: not a client, so not counted as an open connection. */
    private String internalAddress;

    public PeerConnections(LongSupplier clockNs, long retainNs) {
        this.clockNs = clockNs;
        this.retainNs = retainNs;
    }

    /** The request loop saw a message of {@code peer} over the TCP connection from {@code address}. */
    public synchronized void seen(PeerId peer, String address) {
        addressOf.put(peer, address);
        if (!open.containsKey(address) && !closedAtNs.containsKey(address)) {
            // the accept event may come after the first message; the message proves the connection is there
            open.put(address, Boolean.TRUE);
        }
    }

    /** The request loop saw the server's own health probe connect from {@code address} (its latest connection). */
    public synchronized void internal(String address) {
        internalAddress = address;
    }

    public synchronized void accepted(String address) {
        open.put(address, Boolean.TRUE);
        closedAtNs.remove(address);
    }

    public synchronized void closed(String address) {
        open.remove(address);
        closedAtNs.put(address, clockNs.getAsLong());
        if (closedAtNs.size() > MAX_CLOSED) {
            prune();
        }
    }

    /** {@link #OPEN}, the time the peer's connection closed, or {@link #UNKNOWN}. */
    public synchronized long closedSinceNs(PeerId peer) {
        if (peer == null) {
            return UNKNOWN;
        }
        String address = addressOf.get(peer);
        if (address == null) {
            return UNKNOWN;
        }
        if (open.containsKey(address)) {
            return OPEN;
        }
        Long closed = closedAtNs.get(address);
        return closed == null ? UNKNOWN : closed;
    }

    public synchronized int openConnections() {
        return open.size() - (internalAddress != null && open.containsKey(internalAddress) ? 1 : 0);
    }

    /** Forgets closed connections older than the retention (called by the reaper). */
    public synchronized void prune() {
        long nowNs = clockNs.getAsLong();
        for (Iterator<Map.Entry<String, Long>> it = closedAtNs.entrySet().iterator(); it.hasNext(); ) {
            if (nowNs - it.next().getValue() - retainNs > 0) {
                it.remove();
            }
        }
        addressOf.values().removeIf(address -> !open.containsKey(address) && !closedAtNs.containsKey(address));
    }
}
