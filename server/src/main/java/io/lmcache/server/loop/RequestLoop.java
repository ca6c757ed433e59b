package io.lmcache.server.loop;

import io.lmcache.server.agent.NamedThreads;
import io.lmcache.server.config.ConnectionSettings;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.metrics.PhaseTimes;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.peer.PeerConnections;
import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.ProtocolException;
import io.lmcache.server.protocol.RequestDecoder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import org.zeromq.ZMQException;

/**
 * The one thread that owns the ROUTER socket (ZeroMQ sockets are not thread-safe). Each turn of
 * {@link #doWork()} sends the replies handlers have queued and receives a batch of requests,
 * sending what is ready after each one. When there is nothing to do it blocks in a receive on the
 * ROUTER itself, spinning briefly first only while pool handlers are still working on requests
 * (their replies are then due); with nothing in flight it does not spin, because on a busy host
 * the clients and the pools need that core (bench/RESULTS.md#request-path-latency), and on the
 * GPU host a loop spinning in JeroMQ's non-blocking receive slowed the transfer handlers by about
 * half (likely the hyperthread they shared; "GPU: one request in flight"), more than the wake-up
 * it saved. Handler
 * threads wake it with an empty message from an in-process DEALER connected to the same ROUTER:
 * JeroMQ's multi-socket poller costs several times the round trip of a plain blocking receive.
 * Shutdown is by flag and receive timeout, never by interrupting this thread.
 *
 * <p>What a hostile or broken peer can make the ROUTER hold is bounded: a frame longer than
 * {@code --max-message-mb} closes its connection before JeroMQ allocates it; a peer that does not
 * read has at most {@link #PEER_SEND_HWM} replies queued, and the rest are dropped and counted
 * ({@link ReplyDrops}) rather than waited for, since a send never blocks this thread. A JeroMQ I/O
 * thread that dies (it does on an {@link OutOfMemoryError}) is counted and makes the health check
 * fail, as does a {@link LoopbackProbe} PING that goes unanswered.
 */
public final class RequestLoop implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(RequestLoop.class);
    /** A peer can send one such message after another: rate-limited. */
    private static final RateLimitedLog EXTRA_FRAME_LINES = new RateLimitedLog(LOG, "requests with too many frames", 10);
    /** Far above the 10 frames of the largest request; beyond it frames are dropped (and counted as ignored). */
    static final int MAX_FRAMES = 64;
    /**
     * The uid and op frames are echoed in the reply, so their size is what a peer that never reads makes the
     * server hold per queued reply: LMCache's uids are small msgpack values, op frames an int or an op name
     * (at most ~45 bytes); anything longer is no client's request and gets no reply.
     */
    static final int MAX_UID_BYTES = 256;
    static final int MAX_OP_BYTES = 64;
    private static final int RECEIVE_BATCH = 256;
    /** Busy-wait at most this long for a pool handler's reply before blocking (a wake-up costs more than a short spin). */
    private static final long SPIN_NS = 20_000;
    private static final int RECEIVE_TIMEOUT_MS = 100;
    /** Stop reading new requests while this many are unanswered: ZeroMQ's queues then push back on clients. */
    private static final int MAX_INFLIGHT = 16_384;
    /**
     * Replies queued for one peer before more are dropped. A real client reads all the time and has a
     * handful of requests in flight (a worker: a STORE or RETRIEVE per step and a PING; the scheduler:
     * a LOOKUP and QUERY per waiting request, at most vLLM's 256 sequences); 1 000 leaves it ample room
     * while a peer that never reads holds at most 1 000 small replies (about 300 KiB of heap).
     */
    static final int PEER_SEND_HWM = 1000;
    /**
     * Stop reading new requests while the unanswered ones hold this many payload bytes (a few dozen maximal
     * STOREs): the count limit alone let 16 384 long requests hold gigabytes of heap.
     */
    static final long MAX_INFLIGHT_BYTES = Runtime.getRuntime().maxMemory() / 4;
    /**
     * Whole messages a connection may have queued and unread (ZeroMQ counts messages, not frames). Only
     * fills while the loop does not read (the in-flight limits): then a connection holds at most this many
     * messages of at most {@link PartLimit#MAX_PARTS} frames, each small or inside the {@link FrameBudget}.
     */
    static final int PEER_RECEIVE_HWM = 1000;

    private static final String THREAD_NAME = "lmcache-request-loop";

    private final String endpoint;
    /** The loop thread's name, also in its log lines: the start-up warm-up's scratch loop has a name of its own. */
    private final String threadName;
    private final Dispatcher dispatcher;
    private final ReplyQueue replies;
    private final RequestDecoder opDecoder = new RequestDecoder();
    private final ZContext context = new ZContext(1);
    private final ZMQ.Socket router;
    private final ZMQ.Socket wakeSocket;
    private final byte[] wakeIdentity;
    private final PeerConnections connections;
    private final ConnectionMonitor monitor;
    private final LoopbackProbe probe;
    /** The reply queue's wake-up of this loop, bound while the loop's context is open. */
    private final ReplyQueue.Waker waker = this::wake;
    private final ReplyDrops drops;
    private final FrameBudget frames;
    private final TransportDeaths deaths;
    /** Reply bytes handed to the ROUTER that each peer has not taken yet. */
    private final PeerReplyBytes unsentBytes = new PeerReplyBytes();
    /** Streaming replies' control frames and undeliverable peers go here (kv-events.md §8). */
    private final StreamControl streams;
    /** ZeroMQ shares one metadata object per connection: seeing a new one means a new or other peer. */
    private zmq.io.Metadata lastMetadata;
    private final CountDownLatch terminated = new CountDownLatch(1);
    private volatile boolean accepting = true;
    private volatile boolean running = true;
    /** Guarded by {@code wakeSocket}: the context is closed, so its wake socket is too. */
    private boolean contextClosed;
    private volatile long drainDeadlineNs;
    private volatile long lastTurnNs = System.nanoTime();
    private Thread thread;

    /**
     * What the loop serves with: the dispatcher its requests go to, the queue its replies come from, where control frames
     * ({@code [uid, b"", command]}) and peers a reply could not reach are reported ({@link StreamControl#NONE}: no streams), and
     * {@code firstRequest}, which runs once on the loop's thread when the first request from a peer (not the loop's own health
     * probe) of an op that clients do not send while they start ({@link Op#sentAtClientStart}) arrives, before it is
     * dispatched (must not block; null: nothing). A message without a known op does not run it.
     */
    public record Serving(Dispatcher dispatcher, ReplyQueue replies, StreamControl streams, Runnable firstRequest) {}

    /**
     * Binds the socket at once, so a port conflict fails start-up rather than the first request. An endpoint ending in
     * {@code :*} binds a free port, which {@link #endpoint} then names (the start-up warm-up's scratch loop).
     */
    public RequestLoop(String endpoint, long maxMessageBytes, ConnectionSettings limits, Serving serving, PeerConnections connections,
            ServerMetrics metrics) {
        this(THREAD_NAME, endpoint, maxMessageBytes, limits, serving, connections, metrics);
    }

    /** As the server's, its thread (and its log lines) named {@code threadName} instead of lmcache-request-loop (the warm-up's). */
    public RequestLoop(String threadName, String endpoint, long maxMessageBytes, ConnectionSettings limits, Serving serving,
            PeerConnections connections, ServerMetrics metrics) {
        this.threadName = threadName;
        this.dispatcher = serving.dispatcher();
        this.replies = serving.replies();
        this.streams = serving.streams();
        this.firstRequest = serving.firstRequest();
        this.connections = connections;
        drops = new ReplyDrops(metrics, replies);
        deaths = new TransportDeaths(metrics);
        // set before the first socket: the context hands them to its I/O threads when it starts them
        // runs on: a JeroMQ I/O thread that is dying
        context.setUncaughtExceptionHandler(deaths::ioThreadDied);
        // runs on: a JeroMQ I/O thread (it carries on)
        context.setNotificationExceptionHandler(deaths::ioThreadError);
        monitor = new ConnectionMonitor(limits, connections, metrics);
        // runs on: a JeroMQ I/O thread (a connection closed): the peer's streams end
        monitor.onPeerClosed(peer -> {
            unsentBytes.closed(peer);
            streams.connectionClosed(peer);
        });
        // runs on: a JeroMQ I/O thread (the frame allocator, for each message's last frame)
        frames = FrameBudget.forHeap(maxMessageBytes, metrics, monitor::messageEnded);
        monitor.frames(frames);
        router = context.createSocket(SocketType.ROUTER);
        // every engine of this socket allocates its frames here: the budget for long ones, the cap on parts
        router.setMsgAllocator(frames);
        // runs on: a JeroMQ I/O thread, as each connection is accepted or closed (before bind: it hears the listening event too)
        router.base().setEventHook(monitor, ConnectionMonitor.EVENTS);
        // the peer's ZeroMQ stack answers each heartbeat by itself; the monitor, not JeroMQ, closes peers that stop (timeout 0)
        router.setHeartbeatIvl(monitor.heartbeatIntervalMs());
        router.setHeartbeatTimeout(0);
        // so is a handshake that does not finish; JeroMQ's own timer would keep a closed connection's engine for 30 s
        router.setHandshakeIvl(0);
        router.setLinger(2000);
        // JeroMQ checks a frame's declared length against this before it allocates the frame (Decoder.sizeReady)
        router.setMaxMsgSize(maxMessageBytes);
        router.setSndHWM(PEER_SEND_HWM);
        // a send to a full or vanished peer fails at once (EAGAIN, EHOSTUNREACH) instead of dropping silently: counted
        router.setRouterMandatory(true);
        router.setRcvHWM(PEER_RECEIVE_HWM);
        try {
            router.bind(endpoint);
        } catch (ZMQException e) {
            context.close();
            throw ZmqBindFailure.of(endpoint, e);
        }
        this.endpoint = endpoint.endsWith(":*") ? router.getLastEndpoint() : endpoint;
        router.setReceiveTimeOut(RECEIVE_TIMEOUT_MS);
        // the wake-up path: a DEALER with a reserved identity, connected in-process to this ROUTER
        String wakeEndpoint = "inproc://lmcache-wake-" + System.identityHashCode(this);
        router.bind(wakeEndpoint);
        wakeIdentity = ("\u00ffwake-" + System.identityHashCode(this)).getBytes(StandardCharsets.ISO_8859_1);
        wakeSocket = context.createSocket(SocketType.DEALER);
        wakeSocket.setIdentity(wakeIdentity);
        wakeSocket.setSndHWM(16);
        wakeSocket.setLinger(0);
        wakeSocket.connect(wakeEndpoint);
        // runs on: any thread that queues a reply (handler pools, completions)
        replies.bind(waker);
        probe = new LoopbackProbe(this.endpoint);
    }

    /** {@code listener} hears, once and on the dying thread, that the ZeroMQ side can serve no more (see {@link TransportDeaths}). */
    public void onTransportDeath(Consumer<String> listener) {
        deaths.onDeath(listener);
    }

    /**
     * Null while the ZeroMQ side serves; otherwise the part that failed (for the health check). Any thread. Besides a dead
     * I/O thread or an unanswered PING, the server is degraded while peers hold its whole frame budget or connection cap
     * (issue 45, N8): a PING still passes then, but long requests or new workers fail.
     */
    public String transportFailure() {
        String death = deaths.ioThreadDeath();
        if (death != null) {
            return death;
        }
        String probeFailure = probe.failure();
        if (probeFailure != null) {
            return probeFailure;
        }
        String frameBudget = frames.exhausted();
        return frameBudget != null ? "degraded: " + frameBudget : degradedByCap();
    }

    private String degradedByCap() {
        String cap = monitor.atCap();
        return cap == null ? null : "degraded: " + cap;
    }

    /** Test hook: the next frame allocation on JeroMQ's I/O thread fails as exhausted memory did (the thread dies). */
    public void failNextFrameAllocation() {
        frames.failNextAllocation();
    }

    /**
     * Any thread (serialized by the lock): one empty frame to the ROUTER; dropped if the socket is full, and nothing once the
     * loop closed its context (a shutdown's wake that the loop, already leaving, outran; a reply queued after the loop died).
     */
    private void wake() {
        synchronized (wakeSocket) {
            if (!contextClosed) {
                wakeSocket.send(EMPTY, ZMQ.DONTWAIT);
            }
        }
    }

    /** Closes the loop's ZeroMQ context under the wake lock, so no wake sends through a socket being closed. */
    private void closeContext() {
        synchronized (wakeSocket) {
            contextClosed = true;
            context.close();
        }
        replies.unbind(waker);
    }

    private static final byte[] EMPTY = new byte[0];

    /**
     * A socket of this loop's own ZeroMQ context, for the warm-up's client of its scratch loop (an {@code inproc://} endpoint
     * only sockets of the same context can reach, issue 45 N11, or loopback TCP before ready). The caller closes it before
     * {@link #shutdown}.
     */
    public ZMQ.Socket clientSocket(SocketType type) {
        return context.createSocket(type);
    }

    public String endpoint() {
        return endpoint;
    }

    public void start() {
        monitor.start();
        probe.start();
        // runs on: lmcache-request-loop (or the warm-up's), the only thread that touches the ROUTER (not a daemon: it keeps the
        // JVM up)
        thread = NamedThreads.thread(threadName, false, this::run);
        thread.start();
    }

    /** The request path's time outside the handlers (STORE, RETRIEVE), for /status. */
    public PhaseTimes<RequestPhase> dispatchTimes() {
        return dispatcher.times();
    }

    /** When the loop last finished a turn; the health check uses it to tell a wedged loop. */
    public long lastTurnNs() {
        return lastTurnNs;
    }

    public boolean isRunning() {
        return running && thread != null && thread.isAlive();
    }

    private void run() {
        LOG.info("{} listening on {}", threadName, endpoint);
        long idleSinceNs = System.nanoTime();
        try {
            while (running) {
                int work = doWork();
                long nowNs = System.nanoTime();
                lastTurnNs = nowNs;
                if (!accepting && dispatcher.inflight() == 0 && replies.isEmpty()) {
                    break;
                }
                if (!accepting && drainDeadlineNs - System.nanoTime() < 0) {
                    LOG.warn("shutdown: {} request(s) still unanswered after the drain timeout", dispatcher.inflight());
                    break;
                }
                if (work > 0) {
                    idleSinceNs = nowNs;
                } else if (dispatcher.inflight() > 0 && nowNs - idleSinceNs < SPIN_NS) {
                    Thread.onSpinWait();
                } else if (sleep()) {
                    idleSinceNs = System.nanoTime();
                }
            }
        } catch (RuntimeException | Error e) {
            LOG.error("{} failed; no more requests will be served", threadName, e);
            deaths.died("request loop failed: " + e);
        } finally {
            running = false;
            probe.close();
            monitor.close();
            closeContext();
            terminated.countDown();
            LOG.info("{} stopped", threadName);
        }
    }

    /** One turn: sends queued replies, then receives up to a batch of requests. Returns the work done. */
    int doWork() {
        int work = sendReplies();
        if (accepting && dispatcher.inflight() < MAX_INFLIGHT && dispatcher.inflightBytes() < MAX_INFLIGHT_BYTES) {
            for (int i = 0; i < RECEIVE_BATCH; i++) {
                if (!receiveOne()) {
                    break;
                }
                work++;
                // an inline reply goes out at once: JeroMQ's I/O thread writes it on the other core while this
                // thread handles the next request (at the end of the batch, the first reply would wait for all)
                work += sendReplies();
            }
            work += sendReplies();
        }
        return work;
    }

    /** Blocks in a receive until a request or a wake-up arrives (or the timeout); true when one did. */
    private boolean sleep() {
        if (!replies.prepareToSleep()) {
            return true;
        }
        byte[] first;
        try {
            first = receiveFrame(0);
        } finally {
            replies.awake();
        }
        if (first == null) {
            return false;
        }
        handleMessage(first);
        return true;
    }

    private int sendReplies() {
        int sent = 0;
        Outbound reply;
        while ((reply = replies.poll()) != null) {
            send(reply);
            sent++;
        }
        return sent;
    }

    /**
     * Never blocks: with ROUTER_MANDATORY a full or missing peer fails on the identity frame, before
     * any part of the reply is queued, and the reply is dropped (the peer gets all of it or nothing).
     */
    private void send(Outbound reply) {
        PeerId peer = new PeerId(reply.identity());
        long bytes = reply.bytes();
        AtomicLong unsent = unsentBytes.charge(peer, bytes);
        if (unsent == null) {
            refused(reply, peer, bytes);
            return;
        }
        if (!router.base().send(new zmq.Msg(reply.identity()), ZMQ.SNDMORE | ZMQ.DONTWAIT)) {
            unsentBytes.release(unsent, bytes);
            int errno = router.base().errno();
            if (errno == zmq.ZError.EAGAIN) {
                drops.notReading(reply.identity(), PEER_SEND_HWM);
                if (reply.payload() != null) {
                    streams.dropped(new PeerId(reply.identity()), reply.uid()); // a stream's batch is sent again later
                }
            } else if (errno == zmq.ZError.EHOSTUNREACH) {
                drops.gone();
                streams.undeliverable(new PeerId(reply.identity()));
            } else {
                throw new ZMQException(errno);
            }
            return;
        }
        router.send(reply.uid(), ZMQ.SNDMORE);
        // the last frame gives the reply's bytes back when JeroMQ's encoder takes it from the peer's pipe
        if (reply.payload() == null) {
            router.base().send(new PeerReplyBytes.Tracked(reply.op(), unsentBytes, peer, unsent, bytes), 0);
        } else {
            router.send(reply.op(), ZMQ.SNDMORE);
            router.base().send(new PeerReplyBytes.Tracked(reply.payload(), unsentBytes, peer, unsent, bytes), 0);
        }
        if (reply.timed() != null) {
            boolean store = reply.timed() == Op.STORE;
            long sentNs = dispatcher.times().lap(store, RequestPhase.SEND, reply.queuedNs());
            dispatcher.times().sent(store, reply.receivedNs(), reply.queuedNs(), sentNs);
        }
    }

    /** A reply over the peer's share of unread bytes, or over all peers' bound: dropped; a peer over its share is disconnected. */
    private void refused(Outbound reply, PeerId peer, long bytes) {
        long peerBytes = unsentBytes.unsent(peer);
        if (peerBytes + bytes > PeerReplyBytes.PEER_SHARE_BYTES) {
            drops.overShare(reply.identity(), peerBytes, monitor.disconnect(peer));
        } else {
            drops.totalFull();
        }
        if (reply.payload() != null) {
            streams.dropped(peer, reply.uid()); // a stream's batch: sent again later (or the stream ends with the connection)
        }
    }

    private boolean receiveOne() {
        byte[] first = receiveFrame(ZMQ.DONTWAIT);
        if (first == null) {
            return false;
        }
        handleMessage(first);
        return true;
    }

    /** One frame through the socket's base, so the connection's metadata (peer address) is visible; null on EAGAIN. */
    private byte[] receiveFrame(int flags) {
        zmq.Msg msg = router.base().recv(flags);
        if (msg == null) {
            int errno = router.base().errno();
            if (errno == zmq.ZError.EAGAIN) {
                return null;
            }
            throw new ZMQException(errno);
        }
        zmq.io.Metadata metadata = msg.getMetadata();
        if (metadata != null && metadata != lastMetadata) {
            lastMetadata = metadata;
            pendingAddress = metadata.get(zmq.io.Metadata.PEER_ADDRESS);
            lastAddress = pendingAddress;
        }
        pendingOverBudget |= FrameBudget.isOverBudget(msg);
        byte[] data = FrameBudget.bytes(msg, MAX_UID_BYTES);
        FrameBudget.release(msg);
        return data;
    }

    /** Runs at a peer's first request past its start, then null; read and cleared on the loop's thread only. */
    private Runnable firstRequest;
    private String pendingAddress;
    /** The connection of the message being read (its metadata's peer address); the loop's thread only. */
    private String lastAddress;
    /** A frame of the message being read did not fit the frame budget: its bytes are not the peer's. */
    private boolean pendingOverBudget;

    private void handleMessage(byte[] first) {
        byte[][] frames = new byte[8][];
        frames[0] = first;
        int count = 1;
        int dropped = 0;
        pendingAddress = null;
        boolean overBudget = pendingOverBudget;
        pendingOverBudget = false;
        while (router.hasReceiveMore()) {
            byte[] frame = receiveFrame(0);
            if (count == MAX_FRAMES) {
                dropped++;
                continue;
            }
            if (count == frames.length) {
                frames = Arrays.copyOf(frames, Math.min(MAX_FRAMES, count * 2));
            }
            frames[count++] = frame;
        }
        overBudget |= pendingOverBudget;
        pendingOverBudget = false;
        if (count == 2 && Arrays.equals(first, wakeIdentity)) {
            return;
        }
        boolean fromProbe = probe.isProbe(first);
        if (fromProbe) {
            if (pendingAddress != null) {
                monitor.internal(pendingAddress);
                monitor.identified(pendingAddress, new PeerId(first)); // its reply bytes are forgotten when it closes
            }
        } else {
            if (pendingAddress != null) {
                PeerId peer = new PeerId(first);
                connections.seen(peer, pendingAddress);
                monitor.identified(pendingAddress, peer);
            }
        }
        if (dropped > 0) {
            EXTRA_FRAME_LINES.warn("request with {} frames: the {} beyond {} were dropped", count + dropped, dropped, MAX_FRAMES);
        }
        if (count < Inbound.FIRST_PAYLOAD) {
            dispatcher.shortMessage(count);
            return;
        }
        if (frames[2].length == 0 && count > Inbound.FIRST_PAYLOAD) {
            // a stream's control frame, not a request (kv-events.md §2)
            streams.control(new PeerId(first), frames[1], frames[Inbound.FIRST_PAYLOAD]);
            return;
        }
        if (frames[1].length > MAX_UID_BYTES || frames[2].length > MAX_OP_BYTES) {
            dispatcher.oversizedEnvelope(frames[1].length, frames[2].length);
            return;
        }
        Op op;
        try {
            op = opDecoder.decodeOp(frames[2]);
        } catch (ProtocolException e) {
            dispatcher.unknownOp(frames[2], e.getMessage());
            return;
        }
        if (op == null) {
            dispatcher.unknownOp(frames[2], "not in the operation table");
            return;
        }
        if (op == Op.REGISTER_KV_CACHE || op == Op.REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT) {
            monitor.registered(lastAddress); // part of the connection cap is kept for workers that register
        }
        if (firstRequest != null && !op.sentAtClientStart() && !fromProbe) {
            Runnable hook = firstRequest;
            firstRequest = null;
            hook.run();
        }
        Inbound inbound = new Inbound(frames, count, op, System.nanoTime());
        if (overBudget) {
            dispatcher.overBudget(inbound);
        } else {
            dispatcher.dispatch(inbound);
        }
    }

    /**
     * Graceful stop: no new requests are read, the ones in flight are answered (up to {@code drainTimeoutNs}),
     * then the socket is closed, flushing what was sent.
     */
    public void shutdown(long drainTimeoutNs) throws InterruptedException {
        drainDeadlineNs = System.nanoTime() + drainTimeoutNs;
        accepting = false;
        if (thread == null) {
            running = false;
            probe.close();
            closeContext();
            return;
        }
        wake();
        if (!terminated.await(drainTimeoutNs + TimeUnit.SECONDS.toNanos(3), TimeUnit.NANOSECONDS)) {
            LOG.warn("request loop did not stop in time; forcing it");
            running = false;
            terminated.await(5, TimeUnit.SECONDS);
        }
    }

    /**
     * Stops at once, without draining, woken so it need not wait out its receive: tests that simulate a wedged loop, and the
     * warm-up's scratch loop, which has no client left waiting when it stops. A drain there took branches a loop in service
     * never takes (not accepting) and threw away the compiled loop code the server's own loop was about to run
     * ({@code -Xlog:deoptimization}: bench/results/vm-2026-12-06-first-connection-traps/).
     */
    public void halt() throws InterruptedException {
        running = false;
        if (thread != null) {
            wake();
            terminated.await(5, TimeUnit.SECONDS);
        }
    }

    @Override
    public void close() throws InterruptedException {
        shutdown(TimeUnit.SECONDS.toNanos(10));
    }
}
