package io.lmcache.server.loop;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.lmcache.server.config.ConnectionSettings;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.peer.PeerConnections;
import io.lmcache.server.testing.RawZmtpPeer;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.zeromq.ZMQ;

/** The cap's part kept for workers, driven with the ROUTER's accept events over real loopback connections. */
class ConnectionMonitorTest {
    private static final String OVER_CAP = "lmcache_mp.zeromq_connections_refused";

    @Test
    void theHealthProbesConnectionInTheWorkersPartIsNotClosedForNotRegisteringAStrangersIs() throws Exception {
        ServerMetrics metrics = new ServerMetrics();
        PeerConnections peers = new PeerConnections(System::nanoTime, TimeUnit.MINUTES.toNanos(1));
        List<SocketChannel> channels = new ArrayList<>();
        try (ServerSocketChannel listener = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0));
                ConnectionMonitor monitor = new ConnectionMonitor(new ConnectionSettings(16, TimeUnit.MINUTES.toNanos(1), -1), peers,
                        metrics)) {
            monitor.start();
            // 16 less an eighth: 14 unregistered fill the rest; the 15th and 16th come in at the workers' part, the 17th is refused
            SocketChannel probe = null;
            SocketChannel stranger = null;
            for (int i = 0; i < 17; i++) {
                SocketChannel client = SocketChannel.open(listener.getLocalAddress());
                SocketChannel accepted = listener.accept();
                channels.add(client);
                channels.add(accepted);
                monitor.consume(new zmq.ZMQ.Event(ZMQ.EVENT_ACCEPTED, "tcp://127.0.0.1", accepted));
                if (i == 14) {
                    probe = client;
                    InetSocketAddress remote = (InetSocketAddress) accepted.getRemoteAddress();
                    monitor.internal(remote.getAddress().getHostAddress() + ":" + remote.getPort()); // its first PING, identified
                } else if (i == 15) {
                    stranger = client;
                }
            }
            assertEquals(1.0, metrics.count(OVER_CAP, "reason", "over_cap"), "the 17th, at once");
            assertEquals(16, monitor.openConnections());
            assertEquals(15, peers.openConnections(), "told to PeerConnections, the probe is the server's own, not a client");
            SocketChannel strangerClient = stranger;
            await().atMost(Duration.ofSeconds(10)).until(() -> closedByServer(strangerClient));
            // the stranger's close and the probe's would fall due within microseconds of each other: a sweep apart at most
            await().during(Duration.ofMillis(750)).atMost(Duration.ofSeconds(3))
                    .until(() -> metrics.count(OVER_CAP, "reason", "over_cap") == 2.0);
            assertFalse(closedByServer(probe), "the probe's connection stays");
        } finally {
            for (SocketChannel channel : channels) {
                channel.close();
            }
        }
    }

    /** True when the far end shut this connection (end of stream or reset), false while it stays open (nothing within 100 ms). */
    private static boolean closedByServer(SocketChannel client) {
        return RawZmtpPeer.closedByServer(client.socket(), Duration.ofMillis(100));
    }
}
