package io.lmcache.server.loop;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.testing.ServerProcess;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/** The health check's loopback PING: healthy while a ROUTER answers, the reason once none has for 2 s. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class LoopbackProbeTest {

    @Test
    void aWildcardHostIsProbedOnLoopback() {
        assertEquals("tcp://127.0.0.1:5555", LoopbackProbe.connectEndpoint("tcp://0.0.0.0:5555"));
        assertEquals("tcp://127.0.0.1:5555", LoopbackProbe.connectEndpoint("tcp://*:5555"));
        assertEquals("tcp://[::1]:5555", LoopbackProbe.connectEndpoint("tcp://[::]:5555"));
        assertEquals("tcp://localhost:5555", LoopbackProbe.connectEndpoint("tcp://localhost:5555"));
    }

    @Test
    void unhealthyAfterTwoSecondsWithoutAnAnswer() {
        try (LoopbackProbe probe = new LoopbackProbe("tcp://127.0.0.1:" + ServerProcess.freePort())) {
            probe.start();
            assertNull(probe.failure(), "not before 2 s");
            await().atMost(Duration.ofSeconds(6)).pollInterval(Duration.ofMillis(100)).until(() -> probe.failure() != null);
            assertTrue(probe.failure().startsWith("zeromq: loopback PING not answered for "), probe.failure());
        }
    }

    @Test
    void healthyWhileARouterAnswersEveryPing() throws Exception {
        int port = ServerProcess.freePort();
        AtomicInteger pings = new AtomicInteger();
        try (ZContext context = new ZContext(1);
             LoopbackProbe probe = new LoopbackProbe("tcp://127.0.0.1:" + port)) {
            ZMQ.Socket router = context.createSocket(SocketType.ROUTER);
            router.bind("tcp://127.0.0.1:" + port);
            router.setReceiveTimeOut(50);
            probe.start();
            long endNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(4);
            while (System.nanoTime() < endNs) {
                byte[] identity = router.recv(0);
                if (identity == null) {
                    assertNull(probe.failure());
                    continue;
                }
                byte[] uid = router.recv(0);
                byte[] op = router.recv(0);
                byte[] payload = router.recv(0);
                assertTrue(probe.isProbe(identity));
                assertEquals(0x16, op[0]);
                assertEquals((byte) 0xc0, payload[0]);
                pings.incrementAndGet();
                router.send(identity, ZMQ.SNDMORE);
                router.send(uid, ZMQ.SNDMORE);
                router.send(op, ZMQ.SNDMORE);
                router.send(new byte[] {(byte) 0xc3}, 0);
                assertNull(probe.failure());
            }
        }
        assertTrue(pings.get() >= 3, "a PING a second: " + pings.get());
    }
}
