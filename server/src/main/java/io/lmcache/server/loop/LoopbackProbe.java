package io.lmcache.server.loop;

import io.lmcache.server.agent.NamedThreads;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * Proves to the health check that the ZeroMQ path works end to end: a DEALER of the server's own
 * connects over TCP to the ROUTER's endpoint as a client would and sends a real PING (instance id
 * None, the scheduler's untracked probe, which touches no worker's liveness) once a second. The
 * PING takes the normal path: JeroMQ's I/O thread, the request loop, the dispatcher, the reply
 * queue and back; so a dead I/O thread, a wedged loop or a full queue all show as an unanswered
 * PING. The DEALER has its own context, so closing the server's does not pull sockets from under
 * this thread; the ROUTER's side of the connection still runs on the server's I/O thread.
 *
 * <p>A PING late by a second gets a fresh DEALER (a JeroMQ DEALER is now and then born unable to
 * send, see the tests' {@code TestClient}; a cut connection heals the same way), while the
 * unanswered time keeps counting from the first PING not answered.
 */
public final class LoopbackProbe implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(LoopbackProbe.class);
    private static final long INTERVAL_NS = TimeUnit.SECONDS.toNanos(1);
    /** Unanswered this long, the ZeroMQ side is reported unhealthy (a client's heartbeat waits 10 s). */
    static final long UNANSWERED_NS = TimeUnit.SECONDS.toNanos(2);
    private static final int RECEIVE_TIMEOUT_MS = 100;
    private static final long NONE = Long.MIN_VALUE;
    /** PING is op 22 (a msgpack positive fixint); its payload None (0xc0). */
    private static final byte[] PING_OP = {0x16};
    private static final byte[] NIL = {(byte) 0xc0};

    private final String endpoint;
    /** No probe: the ROUTER is in-process only. */
    private final boolean off;
    /** Each DEALER's identity is this plus a counter: a fresh DEALER never waits for the ROUTER to forget the last one's. */
    private final byte[] identityPrefix;
    private int sockets;
    private final ZContext context = new ZContext(1);
    private final Thread thread;
    private volatile boolean running = true;
    private volatile String stopReason = "unknown";
    /** When the oldest PING not answered was sent; {@link #NONE} while every PING sent was answered. */
    private volatile long unansweredSinceNs = NONE;

    /**
     * {@code routerEndpoint}: what the ROUTER bound ({@code tcp://host:port}); a wildcard host is probed on loopback. An
     * {@code inproc://} ROUTER (the warm-up's scratch loop, which no peer may reach) has no probe: its own client is the proof.
     */
    public LoopbackProbe(String routerEndpoint) {
        this.off = routerEndpoint.startsWith("inproc://");
        this.endpoint = off ? routerEndpoint : connectEndpoint(routerEndpoint);
        // a peer cannot guess the random part, so it cannot take the probe's identity first (the ROUTER keeps the first)
        byte[] random = new byte[12];
        new SecureRandom().nextBytes(random);
        this.identityPrefix = ("\u00ffhealth-" + HexFormat.of().formatHex(random) + "-").getBytes(StandardCharsets.ISO_8859_1);
        // runs on: lmcache-health-probe
        thread = NamedThreads.thread("lmcache-health-probe", true, this::run);
    }

    static String connectEndpoint(String routerEndpoint) {
        int colon = routerEndpoint.lastIndexOf(':');
        String host = routerEndpoint.substring("tcp://".length(), colon);
        String local = switch (host) {
            case "*", "0.0.0.0" -> "127.0.0.1";
            case "::", "[::]" -> "[::1]";
            default -> host;
        };
        return "tcp://" + local + routerEndpoint.substring(colon);
    }

    /** Whether a peer is this probe's DEALER: the request loop leaves it out of the connection bookkeeping. Any thread. */
    boolean isProbe(byte[] peerIdentity) {
        return peerIdentity.length > identityPrefix.length
                && Arrays.equals(peerIdentity, 0, identityPrefix.length, identityPrefix, 0, identityPrefix.length);
    }

    public void start() {
        if (!off) {
            thread.start();
        }
    }

    /** Null while PINGs are answered; otherwise what the health check reports. Any thread. */
    public String failure() {
        if (off) {
            return null;
        }
        if (running && !thread.isAlive()) {
            return "zeromq: the health probe stopped: " + stopReason;
        }
        long sinceNs = unansweredSinceNs;
        if (sinceNs == NONE) {
            return null;
        }
        long forNs = System.nanoTime() - sinceNs;
        if (forNs <= UNANSWERED_NS) {
            return null;
        }
        return "zeromq: loopback PING not answered for " + TimeUnit.NANOSECONDS.toSeconds(forNs) + " s";
    }

    private void run() {
        ZMQ.Socket socket = null;
        byte[] expected = null;
        long sentNs = System.nanoTime() - INTERVAL_NS;
        long uid = 0;
        try {
            while (running) {
                long nowNs = System.nanoTime();
                if (socket == null || (expected != null && nowNs - sentNs >= INTERVAL_NS)) {
                    if (socket != null) {
                        context.destroySocket(socket);
                    }
                    socket = open();
                    expected = null;
                }
                if (expected == null && nowNs - sentNs >= INTERVAL_NS) {
                    expected = uidFrame(uid++);
                    socket.send(expected, ZMQ.SNDMORE | ZMQ.DONTWAIT);
                    socket.send(PING_OP, ZMQ.SNDMORE | ZMQ.DONTWAIT);
                    socket.send(NIL, ZMQ.DONTWAIT);
                    sentNs = nowNs;
                    if (unansweredSinceNs == NONE) {
                        unansweredSinceNs = nowNs;
                    }
                }
                byte[] first = socket.recv(0);
                if (first == null) {
                    continue;
                }
                while (socket.hasReceiveMore()) {
                    socket.recv(0);
                }
                if (expected != null && Arrays.equals(first, expected)) {
                    expected = null;
                    unansweredSinceNs = NONE;
                }
            }
        } catch (RuntimeException e) {
            // whatever stopped it, the health check must not go on trusting the last answered PING
            stopReason = e.toString();
            if (running) {
                LOG.warn("health probe stopped: {}", e.toString());
            }
        }
    }

    /** A uid no client uses: msgpack bin8 of "lmcache-health-probe-N" (the server echoes the uid frame unread). */
    private static byte[] uidFrame(long n) {
        byte[] text = ("lmcache-health-probe-" + n).getBytes(StandardCharsets.US_ASCII);
        byte[] frame = new byte[2 + text.length];
        frame[0] = (byte) 0xc4;
        frame[1] = (byte) text.length;
        System.arraycopy(text, 0, frame, 2, text.length);
        return frame;
    }

    private ZMQ.Socket open() {
        ZMQ.Socket socket = context.createSocket(SocketType.DEALER);
        socket.setIdentity((new String(identityPrefix, StandardCharsets.ISO_8859_1) + sockets++).getBytes(StandardCharsets.ISO_8859_1));
        socket.setLinger(0);
        socket.setReceiveTimeOut(RECEIVE_TIMEOUT_MS);
        socket.connect(endpoint);
        return socket;
    }

    @Override
    public void close() {
        running = false;
        if (!off) {
            NamedThreads.join(thread, TimeUnit.SECONDS.toNanos(2));
        }
        context.close();
    }
}
