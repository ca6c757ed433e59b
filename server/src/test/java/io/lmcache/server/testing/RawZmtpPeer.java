package io.lmcache.server.testing;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * A ZMTP 3.0 peer written byte by byte, as an attacker on the host would: a plain TCP socket that
 * does the greeting and READY handshake of a DEALER (NULL mechanism) and then writes whatever
 * frames a test wants, including a frame header declaring a length it never sends. After the
 * handshake it never reads unless asked to, so its receive buffer fills like that of a client
 * that stopped reading.
 */
public final class RawZmtpPeer implements AutoCloseable {
    private static final int FLAG_MORE = 0x01;
    private static final int FLAG_LARGE = 0x02;
    private static final int FLAG_COMMAND = 0x04;

    private final Socket socket;
    private final OutputStream out;

    private RawZmtpPeer(Socket socket) throws IOException {
        this.socket = socket;
        this.out = socket.getOutputStream();
    }

    /** Connects and writes the greeting and READY; {@code receiveBufferBytes} 0 = the system's default. */
    public static RawZmtpPeer connect(int port, int receiveBufferBytes) {
        try {
            Socket socket = new Socket();
            if (receiveBufferBytes > 0) {
                socket.setReceiveBufferSize(receiveBufferBytes);
            }
            socket.connect(new InetSocketAddress("127.0.0.1", port), 5000);
            socket.setSoTimeout(5000);
            RawZmtpPeer peer = new RawZmtpPeer(socket);
            // in turn, as libzmq does: JeroMQ now and then drops a peer that sends its READY (or more) before the server's greeting came
            peer.write(greeting());
            DataInputStream in = new DataInputStream(socket.getInputStream());
            in.readFully(new byte[64]);
            peer.write(readyCommand());
            int flags = in.readUnsignedByte();
            long size = (flags & FLAG_LARGE) != 0 ? in.readLong() : in.readUnsignedByte();
            in.readFully(new byte[(int) size]);
            return peer;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** 64 bytes: signature, version 3.0, mechanism NULL, as-server 0, filler. */
    static byte[] greeting() {
        byte[] greeting = new byte[64];
        greeting[0] = (byte) 0xff;
        greeting[9] = 0x7f;
        greeting[10] = 3;
        greeting[11] = 0;
        byte[] mechanism = "NULL".getBytes(StandardCharsets.US_ASCII);
        System.arraycopy(mechanism, 0, greeting, 12, mechanism.length);
        return greeting;
    }

    /** The NULL mechanism's READY command with the one property a DEALER must send: Socket-Type. */
    static byte[] readyCommand() {
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        body.write(5);
        body.writeBytes("READY".getBytes(StandardCharsets.US_ASCII));
        byte[] name = "Socket-Type".getBytes(StandardCharsets.US_ASCII);
        byte[] value = "DEALER".getBytes(StandardCharsets.US_ASCII);
        body.write(name.length);
        body.writeBytes(name);
        body.writeBytes(ByteBuffer.allocate(4).putInt(value.length).array());
        body.writeBytes(value);
        return frame(FLAG_COMMAND, body.toByteArray());
    }

    private static byte[] frame(int flags, byte[] body) {
        ByteArrayOutputStream frame = new ByteArrayOutputStream();
        if (body.length > 255) {
            frame.write(flags | FLAG_LARGE);
            frame.writeBytes(ByteBuffer.allocate(8).putLong(body.length).array());
        } else {
            frame.write(flags);
            frame.write(body.length);
        }
        frame.writeBytes(body);
        return frame.toByteArray();
    }

    /** One message's frames encoded for the wire, to be written with {@link #write} (many at once if wanted). */
    public static byte[] message(byte[]... frames) {
        ByteArrayOutputStream wire = new ByteArrayOutputStream();
        for (int i = 0; i < frames.length; i++) {
            wire.writeBytes(frame(i < frames.length - 1 ? FLAG_MORE : 0, frames[i]));
        }
        return wire.toByteArray();
    }

    /** One frame with the MORE flag: a part of a message that goes on. */
    public static byte[] part(byte[] body) {
        return frame(FLAG_MORE, body);
    }

    /** Blocks while the server does not read (TCP flow control). */
    public void write(byte[] bytes) throws IOException {
        out.write(bytes);
        out.flush();
    }

    /** The header of a frame of {@code length} bytes (8-byte size), and nothing of its body. */
    public void declareFrame(long length) throws IOException {
        write(ByteBuffer.allocate(9).put((byte) FLAG_LARGE).putLong(length).array());
    }

    /**
     * Sends one more byte of each peer's frame every 500 ms until closed: frames that still make progress, which the server
     * does not take for stalled mid-frame (it closes those within seconds); a peer the server closed is skipped.
     */
    public static AutoCloseable trickle(List<RawZmtpPeer> peers) {
        ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread thread = new Thread(r, "raw-zmtp-trickle");
            thread.setDaemon(true);
            return thread;
        });
        timer.scheduleAtFixedRate(() -> {
            for (RawZmtpPeer peer : peers) {
                try {
                    peer.write(new byte[1]);
                } catch (IOException e) {
                    // closed by the server: nothing more to send
                }
            }
        }, 0, 500, TimeUnit.MILLISECONDS);
        return timer::shutdownNow;
    }

    /**
     * Reads (and discards) what the server sent until it closes the connection: true if it did within
     * {@code timeout}, false if the connection was still open then.
     */
    public boolean closedByServer(Duration timeout) {
        return closedByServer(socket, timeout);
    }

    /** {@link #closedByServer(Duration)} for any client socket (a reset is a close too). */
    public static boolean closedByServer(Socket socket, Duration timeout) {
        try {
            socket.setSoTimeout((int) timeout.toMillis());
            InputStream in = socket.getInputStream();
            byte[] buffer = new byte[4096];
            while (in.read(buffer) >= 0) {
                // whatever the server sent before it closed (a greeting, READY)
            }
            return true;
        } catch (SocketTimeoutException e) {
            return false;
        } catch (IOException e) {
            // a reset is a close too
            return true;
        }
    }

    @Override
    public void close() {
        try {
            socket.close();
        } catch (IOException e) {
            // closing: nothing to do
        }
    }
}
