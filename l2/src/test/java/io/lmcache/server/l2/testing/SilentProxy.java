package io.lmcache.server.l2.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A TCP forwarder on a loopback port in front of a real node, that can turn silent: it then keeps accepting and reading every
 * connection (old and new) and answers nothing, as a hung node or a black-holed network does. {@link #speak} closes every
 * connection (the bytes swallowed broke their protocol stream) and forwards the new ones again. Threads are daemons; close stops all.
 */
public final class SilentProxy implements AutoCloseable {
    private final ServerSocket listener;
    private final int targetPort;
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();
    private volatile boolean silent;
    private volatile boolean closed;

    public SilentProxy(int targetPort) throws IOException {
        this.targetPort = targetPort;
        this.listener = new ServerSocket();
        listener.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
        Thread.ofPlatform().daemon().name("silent-proxy-accept").start(this::accept);
    }

    public int port() {
        return listener.getLocalPort();
    }

    /** From now on nothing is answered, on open connections and new ones. */
    public void silence() {
        silent = true;
    }

    /** Answers again: every connection is closed, so the client reconnects to a clean stream. */
    public void speak() {
        silent = false;
        sockets.forEach(SilentProxy::closeQuietly);
        sockets.clear();
    }

    private void accept() {
        while (!closed) {
            try {
                Socket client = listener.accept();
                sockets.add(client);
                if (silent) {
                    Thread.ofPlatform().daemon().start(() -> pump(client, null));
                    continue;
                }
                Socket node = new Socket(InetAddress.getLoopbackAddress(), targetPort);
                sockets.add(node);
                Thread.ofPlatform().daemon().start(() -> pump(client, node));
                Thread.ofPlatform().daemon().start(() -> pump(node, client));
            } catch (IOException e) {
                if (closed) {
                    return;
                }
            }
        }
    }

    /** Copies from {@code from} to {@code to}; while silent (or with no {@code to}) reads and drops. */
    private void pump(Socket from, Socket to) {
        byte[] buffer = new byte[64 * 1024];
        try (InputStream in = from.getInputStream()) {
            OutputStream out = to == null ? null : to.getOutputStream();
            for (int n; (n = in.read(buffer)) >= 0; ) {
                if (out != null && !silent) {
                    out.write(buffer, 0, n);
                    out.flush();
                }
            }
        } catch (IOException e) {
            // closed: the pump ends
        } finally {
            closeQuietly(from);
            if (to != null) {
                closeQuietly(to);
            }
        }
    }

    private static void closeQuietly(Socket socket) {
        try {
            socket.close();
        } catch (IOException e) {
            // already closed
        }
    }

    @Override
    public void close() {
        closed = true;
        closeQuietly(listener);
        sockets.forEach(SilentProxy::closeQuietly);
    }

    private static void closeQuietly(ServerSocket socket) {
        try {
            socket.close();
        } catch (IOException e) {
            // already closed
        }
    }
}
