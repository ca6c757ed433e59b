package io.lmcache.server.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * A DEALER client like LMCache's: its own identity and uid counter, frames {@code [uid, op, payload...]}.
 *
 * <p>A fresh JeroMQ DEALER is occasionally born broken: it sends nothing at all (about one in a
 * few hundred sockets here, against any ROUTER, pyzmq's too; pyzmq's DEALER never did). So the
 * constructor completes a round trip with NOOP probes, whose uid frame is a string no test uses,
 * and replaces a socket that stays silent; {@link #receive} drops late probe replies.
 */
public final class TestClient implements AutoCloseable {
    private static final ZContext CONTEXT = new ZContext(1);
    private static final byte[] PROBE_UID = pack(p -> p.packString("test-client-probe"));
    private static final byte[] NOOP_OP = pack(p -> p.packInt(24));

    private final ZMQ.Socket socket;
    private int nextUid;

    public TestClient(String endpoint) {
        this(endpoint, null);
    }

    /** A client whose ZeroMQ identity (the server's peer id) is {@code identity}; null: ZeroMQ picks one. */
    public TestClient(String endpoint, byte[] identity) {
        for (int socketAttempt = 0; socketAttempt < 10; socketAttempt++) {
            ZMQ.Socket candidate = CONTEXT.createSocket(SocketType.DEALER);
            candidate.setLinger(0);
            candidate.setHWM(100_000);
            if (identity != null) {
                candidate.setIdentity(identity);
            }
            candidate.connect(endpoint);
            if (probe(candidate)) {
                socket = candidate;
                return;
            }
            candidate.close();
        }
        throw new AssertionError("no answer to NOOP probes from " + endpoint + " on 10 fresh sockets");
    }

    /** Up to ~2 s of NOOP round trips; true once one is answered. */
    private static boolean probe(ZMQ.Socket candidate) {
        for (int attempt = 0; attempt < 8; attempt++) {
            candidate.send(PROBE_UID, ZMQ.SNDMORE);
            candidate.send(NOOP_OP, 0);
            candidate.setReceiveTimeOut(250);
            byte[] uid;
            while ((uid = candidate.recv(0)) != null) {
                while (candidate.hasReceiveMore()) {
                    candidate.recv(0);
                }
                if (Arrays.equals(uid, PROBE_UID)) {
                    return true;
                }
            }
        }
        return false;
    }

    /** A reply: the echoed uid and op frames and the payload, or null when the reply had none. */
    public record Reply(byte[] uid, byte[] op, byte[] payload, int frames) {
        public String payloadHex() {
            return payload == null ? null : HexFormat.of().formatHex(payload);
        }
    }

    public interface Payload {
        void write(MessageBufferPacker packer) throws IOException;
    }

    public static byte[] pack(Payload payload) {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            payload.write(packer);
            return packer.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Sends {@code [uid, op, payloads...]} with the next uid; returns that uid. */
    public int send(int op, byte[]... payloads) {
        int uid = nextUid++;
        List<byte[]> frames = new ArrayList<>();
        frames.add(pack(p -> p.packInt(uid)));
        frames.add(pack(p -> p.packInt(op)));
        frames.addAll(List.of(payloads));
        sendRaw(frames.toArray(byte[][]::new));
        return uid;
    }

    /** Sends frames exactly as given. */
    public void sendRaw(byte[]... frames) {
        for (int i = 0; i < frames.length; i++) {
            socket.send(frames[i], i < frames.length - 1 ? ZMQ.SNDMORE : 0);
        }
    }

    /** The next reply, or null after {@code timeout}. */
    public Reply receive(Duration timeout) {
        long deadlineNs = System.nanoTime() + timeout.toNanos();
        byte[] uid;
        List<byte[]> rest = new ArrayList<>();
        do {
            long leftMs = Math.max(1, (deadlineNs - System.nanoTime()) / 1_000_000);
            socket.setReceiveTimeOut((int) leftMs);
            uid = socket.recv(0);
            if (uid == null) {
                return null;
            }
            rest.clear();
            while (socket.hasReceiveMore()) {
                rest.add(socket.recv(0));
            }
        } while (Arrays.equals(uid, PROBE_UID));
        byte[] op = rest.isEmpty() ? null : rest.get(0);
        byte[] payload = rest.size() > 1 ? rest.get(1) : null;
        return new Reply(uid, op, payload, 1 + rest.size());
    }

    /** Sends and waits for the reply (at most 10 s); fails when none comes. */
    public Reply call(int op, byte[]... payloads) {
        int uid = send(op, payloads);
        Reply reply = receive(Duration.ofSeconds(10));
        if (reply == null) {
            throw new AssertionError("no reply to op " + op + " (uid " + uid + ") within 10 s");
        }
        return reply;
    }

    @Override
    public void close() {
        socket.close();
    }
}
