package io.lmcache.server.loop;

import io.lmcache.server.agent.NamedThreads;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.channels.SelectableChannel;
import java.nio.channels.SocketChannel;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * Watches the ROUTER's connections through a ZeroMQ socket monitor: each accepted connection's
 * channel is remembered with its remote address, so the close event (which carries only the
 * channel) can be told to {@link PeerConnections} by address. Owns its monitor socket on its own
 * thread, lmcache-connection-monitor, rather than being a housekeeping agent: it waits in a
 * receive on a socket of the request loop's ZeroMQ context, which closes it after this thread has
 * stopped. Stops by flag and receive timeout, never by interrupt.
 */
public final class ConnectionMonitor implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ConnectionMonitor.class);

    private final ZMQ.Socket socket;
    private final PeerConnections connections;
    private final Map<SelectableChannel, String> addresses = new IdentityHashMap<>();
    private final Thread thread;
    private volatile boolean running = true;

    /** Call before the ROUTER binds, with the endpoint passed to its {@code monitor()}. */
    public ConnectionMonitor(ZContext context, String monitorEndpoint, PeerConnections connections) {
        this.connections = connections;
        socket = context.createSocket(SocketType.PAIR);
        socket.setReceiveTimeOut(200);
        socket.setLinger(0);
        socket.connect(monitorEndpoint);
        // runs on: lmcache-connection-monitor
        thread = NamedThreads.thread("lmcache-connection-monitor", true, this::run);
    }

    public void start() {
        thread.start();
    }

    private void run() {
        while (running) {
            zmq.ZMQ.Event event;
            try {
                event = zmq.ZMQ.Event.read(socket.base(), 0);
            } catch (RuntimeException e) {
                if (running) {
                    LOG.warn("connection monitor stopped: {}", e.toString());
                }
                return;
            }
            if (event == null) {
                continue;
            }
            try {
                SelectableChannel channel = event.getChannel(socket.base());
                if (event.event == ZMQ.EVENT_ACCEPTED && channel instanceof SocketChannel socketChannel) {
                    String address = address(socketChannel);
                    if (address != null) {
                        addresses.put(channel, address);
                        connections.accepted(address);
                    }
                } else if (event.event == ZMQ.EVENT_DISCONNECTED && channel != null) {
                    String address = addresses.remove(channel);
                    if (address != null) {
                        connections.closed(address);
                        LOG.debug("client connection from {} closed", address);
                    }
                }
            } catch (RuntimeException e) {
                LOG.debug("unreadable monitor event: {}", e.toString());
            }
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

    @Override
    public void close() {
        running = false;
        NamedThreads.join(thread, TimeUnit.SECONDS.toNanos(2));
        socket.close();
    }
}
