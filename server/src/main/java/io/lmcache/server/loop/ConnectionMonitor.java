package io.lmcache.server.loop;

import io.lmcache.server.agent.NamedThreads;
import io.lmcache.server.config.ConnectionSettings;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.metrics.ConnectionMetrics;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.peer.PeerConnections;
import io.lmcache.server.peer.PeerId;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.ZMQ;
import zmq.io.Metadata;

/**
 * The ROUTER's TCP connections: told to {@link PeerConnections} as they open and close, capped,
 * and closed when they stall. It is the ROUTER's socket event hook, so it hears of each connection
 * on JeroMQ's I/O thread as it is accepted, before any of its bytes are read:
 * <ul>
 * <li>over {@code --max-connections} it closes the new connection at once (shut down: JeroMQ's
 *     engine then reads the end of the stream and tears it down as usual), counted and logged at a
 *     limited rate; connections already open keep working. An eighth of the cap is kept for workers:
 *     connections that have not sent a REGISTER fill at most the rest, and one let into that eighth is
 *     closed (counted as refused) unless it registers within {@link #REGISTER_GRACE_NS} or is the
 *     server's own health probe ({@link #internal}), so live
 *     connections that never register cannot lock new workers out (issue 45, N8);
 * <li>when {@code accept} fails for want of descriptors it drains the backlog ({@link AcceptDrain}),
 *     so JeroMQ's accept loop does not spin;
 * <li>the request loop's frame allocator tells it of every complete message; its own thread,
 *     lmcache-connection-monitor, closes connections that completed none for the stall timeout. The
 *     ROUTER sends ZeroMQ heartbeats ({@link #heartbeatIntervalMs}) that every ZMTP 3.1 client
 *     (libzmq, JeroMQ) answers by itself, so an idle client completes a message at each one; a peer
 *     stalled mid-frame cannot, so the frame it holds in the budget is given back.
 * </ul>
 * Connections are told apart by the remote address, as ZeroMQ's Peer-Address metadata writes it.
 * ZMTP 1.0/2.0 peers carry no metadata and are closed as stalled (no LMCache client speaks them).
 */
public final class ConnectionMonitor implements zmq.ZMQ.EventConsummer, AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ConnectionMonitor.class);
    static final int EVENTS = ZMQ.EVENT_LISTENING | ZMQ.EVENT_ACCEPTED | ZMQ.EVENT_ACCEPT_FAILED | ZMQ.EVENT_DISCONNECTED;
    private static final long SWEEP_NS = TimeUnit.MILLISECONDS.toNanos(250);
    /** A flood of stalling peers costs at most one collection a second. */
    private static final long COLLECT_INTERVAL_NS = TimeUnit.SECONDS.toNanos(1);
    private static final int COLLECT_TRIES = 3;
    /** The longest heartbeat interval: an idle client answers at least this often, so "completed nothing" is soon telling. */
    private static final long MAX_HEARTBEAT_MS = 1000;
    /**
     * While a frame is stalled mid-way ({@link FrameBudget#stalledFrames}), connections that completed nothing (no message,
     * no heartbeat answer) for this long are closed: well over the heartbeat interval, far under the stall timeout.
     */
    static final long MID_FRAME_QUIET_NS = TimeUnit.SECONDS.toNanos(3);
    /** A connection let in to the part of the cap kept for registered peers has this long to REGISTER. */
    static final long REGISTER_GRACE_NS = TimeUnit.SECONDS.toNanos(2);
    /** The health check reports the cap reached for this long after a connection was refused at it. */
    private static final long AT_CAP_WINDOW_NS = TimeUnit.SECONDS.toNanos(5);

    private final int maxConnections;
    /**
     * The part of the cap kept for connections that REGISTER a worker (issue 45, N8): connections that have not registered
     * may fill the rest; one accepted into this part is closed if it has not registered within {@link #REGISTER_GRACE_NS}.
     */
    private final int registeredReserve;
    /** Open connections that have registered (their {@link Open#registered} set). */
    private final AtomicInteger registeredOpen = new AtomicInteger();
    private final long stallTimeoutNs;
    private final PeerConnections connections;
    /** Written on the I/O thread (accepted, closed), read on the monitor's: every open TCP connection by its remote address. */
    private final Map<String, Open> open = new ConcurrentHashMap<>();
    private final AcceptDrain drain = new AcceptDrain();
    private final ConnectionMetrics counts;
    private final RateLimitedLog refusedLog = new RateLimitedLog(LOG, "ZeroMQ connections refused", 1);
    private final RateLimitedLog stalledLog = new RateLimitedLog(LOG, "stalled ZeroMQ connections closed", 1);
    private final Thread thread;
    private volatile boolean running = true;
    /** When to collect what closed stalled connections left (I/O thread sets, monitor thread reads), and how many tries are left. */
    private volatile long collectAtNs;
    private volatile int collectTries;
    /** When a connection was last refused at the cap (the I/O thread writes, the health check reads). */
    private volatile long lastRefusedNs = System.nanoTime() - 2 * AT_CAP_WINDOW_NS;
    private long lastCollectNs = System.nanoTime() - COLLECT_INTERVAL_NS;
    private volatile FrameBudget frames;
    /** Hears of each identified peer whose connection closed (the I/O thread); set before start. */
    private volatile Consumer<PeerId> peerClosed = peer -> { };
    /** I/O thread only: the connection of the last message seen (ZeroMQ shares one metadata object per connection). */
    private Metadata lastMetadata;
    private Open lastOpen;

    public ConnectionMonitor(ConnectionSettings settings, PeerConnections connections, ServerMetrics metrics) {
        this.maxConnections = settings.maxConnections();
        this.registeredReserve = maxConnections / 8;
        this.stallTimeoutNs = settings.stallTimeoutNs();
        this.connections = connections;
        // runs on: lmcache-http-* (each scrape, the gauge of open connections)
        counts = ConnectionMetrics.declare(metrics, open::size);
        // runs on: lmcache-connection-monitor
        thread = NamedThreads.thread("lmcache-connection-monitor", true, this::run);
    }

    /**
     * The ROUTER's heartbeat: three to a stall timeout and at least once a second, so an idle client answers well within
     * the stall timeout and within {@link #MID_FRAME_QUIET_NS}.
     */
    int heartbeatIntervalMs() {
        return (int) Math.max(100, Math.min(MAX_HEARTBEAT_MS, TimeUnit.NANOSECONDS.toMillis(stallTimeoutNs) / 3));
    }

    /** Null, or why no more connections can come in now: the cap is reached, or was within the last seconds (the health check). */
    String atCap() {
        int openNow = open.size();
        if (openNow >= maxConnections || System.nanoTime() - lastRefusedNs < AT_CAP_WINDOW_NS) {
            return "the ZeroMQ connection cap is reached (" + openNow + " of " + maxConnections + " open, --max-connections): "
                    + "new workers are refused";
        }
        return null;
    }

    /** {@code listener} hears, on the I/O thread, of each peer whose connection closed (its identity as the loop last saw it). */
    void onPeerClosed(Consumer<PeerId> listener) {
        this.peerClosed = listener;
    }

    /** Runs on: the request loop's thread, when a connection's first message (or the first after another's) names its peer. */
    void identified(String address, PeerId peer) {
        Open connection = open.get(address);
        if (connection != null) {
            connection.identity = peer;
        }
    }

    /**
     * Runs on: the request loop's thread, when the health probe's first message names its connection. The probe is the server's
     * own: {@link PeerConnections} does not count it as a client, and let in at the part of the cap kept for workers (a fresh
     * DEALER while unregistered peers hold the rest), it is not closed for not registering, which would leave the health check
     * saying its PING went unanswered instead of naming the cap.
     */
    void internal(String address) {
        connections.internal(address);
        Open connection = open.get(address);
        if (connection != null) {
            connection.internal = true;
        }
    }

    /** Runs on: the request loop's thread, when a REGISTER arrives over the connection from {@code address}. */
    void registered(String address) {
        Open connection = address == null ? null : open.get(address);
        if (connection != null && !connection.registered) {
            connection.registered = true;
            registeredOpen.incrementAndGet();
        }
    }

    /** Runs on: the request loop's thread. Closes the connections of {@code peer}; returns how many. */
    int disconnect(PeerId peer) {
        int closed = 0;
        for (Open connection : open.values()) {
            if (peer.equals(connection.identity) && !connection.shut) {
                connection.shut = true;
                shut(connection.channel);
                closed++;
            }
        }
        return closed;
    }

    /** The frame budget whose abandoned frames to collect after closing stalled connections. */
    void frames(FrameBudget budget) {
        this.frames = budget;
    }

    public void start() {
        thread.start();
    }

    /** Runs on: a JeroMQ I/O thread (the event hook); must never throw, or the thread dies. */
    @Override
    public void consume(zmq.ZMQ.Event event) {
        try {
            switch (event.event) {
                case ZMQ.EVENT_ACCEPTED -> {
                    if (event.arg instanceof SocketChannel channel) {
                        accepted(channel);
                    }
                }
                case ZMQ.EVENT_DISCONNECTED -> {
                    if (event.arg instanceof SocketChannel channel) {
                        disconnected(channel);
                    }
                }
                case ZMQ.EVENT_ACCEPT_FAILED -> acceptFailed(event.arg);
                case ZMQ.EVENT_LISTENING -> {
                    if (event.arg instanceof ServerSocketChannel listener) {
                        drain.listening(listener);
                    }
                }
                default -> {
                    // not asked for
                }
            }
        } catch (RuntimeException e) {
            LOG.debug("connection event {} not handled: {}", event.event, e.toString());
        }
    }

    private void accepted(SocketChannel channel) {
        String address = address(channel);
        if (address == null) {
            return;
        }
        if (open.size() >= maxConnections) {
            shut(channel);
            lastRefusedNs = System.nanoTime();
            counts.overCap().increment();
            refusedLog.warn("ZeroMQ connection from {} refused: {} connections are open, the cap (--max-connections); "
                    + "counted in lmcache_mp_zeromq_connections_refused_total", address, open.size());
            return;
        }
        Open connection = new Open(channel, System.nanoTime());
        if (open.size() - registeredOpen.get() >= maxConnections - registeredReserve) {
            connection.registerByNs = connection.quietSinceNs + REGISTER_GRACE_NS; // only a registering worker may stay
        }
        open.put(address, connection);
        connections.accepted(address);
    }

    private void disconnected(SocketChannel channel) {
        String address = address(channel);
        if (address != null) {
            Open gone = open.get(address);
            if (gone != null && gone.channel == channel) {
                open.remove(address);
                if (gone.registered) {
                    registeredOpen.decrementAndGet();
                }
                if (gone.shut) {
                    collectLater();
                }
                connections.closed(address);
                PeerId peer = gone.identity;
                if (peer != null) {
                    peerClosed.accept(peer);
                }
                LOG.debug("client connection from {} closed", address);
            }
        }
    }

    /** JeroMQ's code for an IOException that is not a SocketException: EMFILE and ENFILE come as these. */
    private void acceptFailed(Object errno) {
        counts.acceptFailures().increment();
        if (errno instanceof Integer code && code == zmq.ZError.EIOEXC) {
            int drained = drain.drain();
            if (drained > 0) {
                counts.noDescriptor().add(drained);
                refusedLog.warn("out of descriptors (ulimit -n): {} waiting ZeroMQ connection(s) refused; lower --max-connections "
                        + "or raise the limit", drained);
            }
        }
    }

    /**
     * JeroMQ destroys a closed connection's engine at once, but its cancelled timers keep it reachable until they
     * would have fired (PollerBase removes them then, once no live timer due earlier stops its scan): the heartbeat
     * within an interval. (The handshake timer, 30 s from the connection's start, held them longer: it is off, and a
     * peer that never finishes its handshake completes no message and stalls.) So the frame the connection left is
     * garbage an interval later; a few tries a second apart find it however the timers fall.
     */
    private void collectLater() {
        collectAtNs = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.max(heartbeatIntervalMs(), 1000)) + SWEEP_NS;
        collectTries = COLLECT_TRIES;
    }

    /** Runs on: a JeroMQ I/O thread, for the last frame of every message (the frame allocator). */
    void messageEnded(Metadata metadata) {
        if (metadata != lastMetadata) {
            lastMetadata = metadata;
            String address = metadata.get(Metadata.PEER_ADDRESS);
            lastOpen = address == null ? null : open.get(address);
        }
        Open connection = lastOpen;
        if (connection != null && !connection.active) {
            connection.active = true;
        }
    }

    private void run() {
        while (running) {
            // parked, not slept: close unparks it, so a stop (the warm-up's scratch loop stops at every start) does not wait
            // out the sweep interval; an early wake-up only sweeps early
            LockSupport.parkNanos(SWEEP_NS);
            if (Thread.currentThread().isInterrupted()) {
                return; // as the sleep it replaced: an interrupt ends the thread (a park would return at once, again and again)
            }
            if (running) {
                sweep(System.nanoTime());
            }
        }
    }

    /** Closes the connections that completed no message for the stall timeout; gives their frames back. */
    private void sweep(long nowNs) {
        FrameBudget budget = frames;
        if (collectTries > 0 && budget != null && nowNs - collectAtNs >= 0 && nowNs - lastCollectNs - COLLECT_INTERVAL_NS > 0) {
            collectTries--;
            lastCollectNs = nowNs;
            budget.collectAbandoned();
        }
        // a frame stalled mid-way: its connection is one of those that completed nothing lately (an idle one answers heartbeats)
        boolean midFrameStall = budget != null && budget.stalledFrames(nowNs) > 0;
        long quietLimitNs = midFrameStall ? Math.min(stallTimeoutNs, MID_FRAME_QUIET_NS) : stallTimeoutNs;
        for (Map.Entry<String, Open> entry : open.entrySet()) {
            Open connection = entry.getValue();
            if (connection.registerByNs != 0 && !connection.registered && !connection.internal && !connection.shut
                    && nowNs - connection.registerByNs > 0) {
                connection.shut = true;
                shut(connection.channel);
                lastRefusedNs = nowNs;
                counts.overCap().increment();
                refusedLog.warn("ZeroMQ connection from {} closed: it came in at the part of the cap kept for registered workers "
                        + "({} of {} open) and did not REGISTER; counted in lmcache_mp_zeromq_connections_refused_total",
                        entry.getKey(), open.size(), maxConnections);
                continue;
            }
            if (connection.active) {
                connection.active = false;
                connection.quietSinceNs = nowNs;
            } else if (nowNs - connection.quietSinceNs - quietLimitNs > 0 && !connection.shut) {
                connection.shut = true;
                shut(connection.channel);
                counts.stalled().increment();
                stalledLog.warn("ZeroMQ connection from {} closed: no complete message for {} s (stalled mid-frame or not answering "
                        + "heartbeats); counted in lmcache_mp_zeromq_connections_closed_total", entry.getKey(),
                        TimeUnit.NANOSECONDS.toSeconds(nowNs - connection.quietSinceNs));
            }
        }
        if (budget != null) {
            budget.releaseUnreachable();
        }
    }

    /** Ends both directions: JeroMQ's engine reads the end of the stream on its thread and closes the connection as usual. */
    private static void shut(SocketChannel channel) {
        try {
            channel.shutdownInput();
            channel.shutdownOutput();
        } catch (IOException e) {
            // already closed or reset: the engine sees that too
        }
    }

    /** host:port, as ZeroMQ's Peer-Address metadata writes it. */
    private static String address(SocketChannel channel) {
        try {
            if (channel.getRemoteAddress() instanceof InetSocketAddress remote) {
                return remote.getAddress().getHostAddress() + ":" + remote.getPort();
            }
        } catch (IOException e) {
            return null;
        }
        return null;
    }

    int openConnections() {
        return open.size();
    }

    @Override
    public void close() {
        running = false;
        LockSupport.unpark(thread);
        NamedThreads.join(thread, TimeUnit.SECONDS.toNanos(2));
        drain.close();
    }

    /** One open connection; {@code active} is set by the I/O thread, cleared with the rest by the monitor's. */
    private static final class Open {
        final SocketChannel channel;
        volatile boolean active;
        long quietSinceNs;
        boolean shut;
        /** The peer identity of the connection's messages (the request loop's thread sets it). */
        volatile PeerId identity;
        /** It has sent a REGISTER (the request loop's thread sets it). */
        volatile boolean registered;
        /** The health probe's (the request loop's thread sets it). */
        volatile boolean internal;
        /** 0, or when it must have registered by (it came in at the registered peers' part of the cap). */
        long registerByNs;

        Open(SocketChannel channel, long acceptedNs) {
            this.channel = channel;
            this.quietSinceNs = acceptedNs;
        }
    }
}
