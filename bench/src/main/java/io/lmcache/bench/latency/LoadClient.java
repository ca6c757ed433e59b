package io.lmcache.bench.latency;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Arrays;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * One closed-loop client: a DEALER like LMCache's (frames {@code [uid, op, payload...]}, uid
 * counting from 0), used by one thread. The same code drives the echo baseline and the server.
 *
 * <p>A freshly created JeroMQ DEALER is occasionally born broken and never delivers anything, so
 * the constructor completes a NOOP round trip (its uid a string no measured request uses) and
 * replaces a socket that stays silent for 250 ms; {@link #roundTrip} skips late probe replies.
 */
final class LoadClient implements AutoCloseable {
    private static final byte[] PROBE_UID = Requests.pack(p -> p.packString("bench-probe"));
    private static final byte[] NOOP_OP = Requests.pack(p -> p.packInt(Requests.NOOP));
    private static final int PROBE_TIMEOUT_MS = 250;
    private static final int REPLY_TIMEOUT_MS = 10_000;

    private final ZMQ.Socket socket;
    private final MessageBufferPacker uidPacker = MessagePack.newDefaultBufferPacker();
    private final byte[] opFrame;
    private final byte[][] payloads;
    private int nextUid;
    /** Sockets that had to be replaced before one answered (reported: it says how often the quirk hit). */
    final int brokenSockets;

    LoadClient(ZContext context, String endpoint, Requests.Kind kind) {
        this.opFrame = Requests.pack(p -> p.packInt(kind.op()));
        this.payloads = kind.payloads();
        for (int attempt = 0; attempt < 20; attempt++) {
            ZMQ.Socket candidate = context.createSocket(SocketType.DEALER);
            candidate.setLinger(0);
            candidate.setHWM(100_000);
            candidate.connect(endpoint);
            if (probe(candidate)) {
                socket = candidate;
                brokenSockets = attempt;
                socket.setReceiveTimeOut(REPLY_TIMEOUT_MS);
                return;
            }
            candidate.close();
        }
        throw new IllegalStateException("no answer to a NOOP probe from " + endpoint + " on 20 fresh sockets");
    }

    private static boolean probe(ZMQ.Socket candidate) {
        candidate.setReceiveTimeOut(PROBE_TIMEOUT_MS);
        candidate.send(PROBE_UID, ZMQ.SNDMORE);
        candidate.send(NOOP_OP, 0);
        byte[] uid = candidate.recv(0);
        boolean answered = uid != null && Arrays.equals(uid, PROBE_UID);
        while (uid != null && candidate.hasReceiveMore()) {
            candidate.recv(0);
        }
        return answered;
    }

    /**
     * Sends one request and waits for its reply; returns the round trip in nanoseconds. Fails on a
     * timeout or a reply that does not echo the uid and op or has another frame count.
     */
    long roundTrip(int expectedFrames) {
        byte[] uid = nextUidFrame();
        long startNs = System.nanoTime();
        socket.send(uid, ZMQ.SNDMORE);
        socket.send(opFrame, payloads.length == 0 ? 0 : ZMQ.SNDMORE);
        for (int i = 0; i < payloads.length; i++) {
            socket.send(payloads[i], i < payloads.length - 1 ? ZMQ.SNDMORE : 0);
        }
        while (true) {
            byte[] replyUid = socket.recv(0);
            if (replyUid == null) {
                throw new IllegalStateException("no reply within " + REPLY_TIMEOUT_MS + " ms");
            }
            int frames = 1;
            byte[] replyOp = null;
            while (socket.hasReceiveMore()) {
                byte[] frame = socket.recv(0);
                if (frames++ == 1) {
                    replyOp = frame;
                }
            }
            long endNs = System.nanoTime();
            if (Arrays.equals(replyUid, PROBE_UID)) {
                continue; // a probe answered late
            }
            if (!Arrays.equals(replyUid, uid) || !Arrays.equals(replyOp, opFrame) || frames != expectedFrames) {
                throw new IllegalStateException("unexpected reply: " + frames + " frames, uid/op echoed: "
                        + Arrays.equals(replyUid, uid) + "/" + Arrays.equals(replyOp, opFrame));
            }
            return endNs - startNs;
        }
    }

    private byte[] nextUidFrame() {
        try {
            uidPacker.clear();
            uidPacker.packInt(nextUid++);
            return uidPacker.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public void close() {
        socket.close();
    }
}
