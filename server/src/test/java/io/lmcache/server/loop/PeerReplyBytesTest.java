package io.lmcache.server.loop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.lmcache.server.peer.PeerId;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/** Unsent reply bytes per peer (issue 45, N2): charged as the loop sends, given back as JeroMQ's encoder takes the reply. */
class PeerReplyBytesTest {
    private static final PeerId READER = new PeerId(new byte[] {1});
    private static final PeerId IDLE = new PeerId(new byte[] {2});

    @Test
    void aPeerThatDoesNotReadIsRefusedPastItsShareAndOneThatReadsIsNot() {
        PeerReplyBytes bytes = new PeerReplyBytes(10_000, 1_000_000);
        for (int i = 0; i < 5; i++) {
            assertNotNull(bytes.charge(IDLE, 2_000), "reply " + i);
        }
        assertNull(bytes.charge(IDLE, 2_000), "over its share: dropped");
        assertEquals(10_000, bytes.unsent(IDLE));
        for (int i = 0; i < 50; i++) {
            AtomicLong own = bytes.charge(READER, 2_000);
            new PeerReplyBytes.Tracked(new byte[10], bytes, READER, own, 2_000).buf(); // the encoder takes it
        }
        assertEquals(0, bytes.unsent(READER), "a reader's replies are given back as they leave");
        bytes.closed(IDLE);
        assertEquals(0, bytes.total(), "a closed peer's pipe is gone, and its bytes with it");
        assertNotNull(bytes.charge(IDLE, 2_000));
    }

    @Test
    void theEncoderTakingAReplyGivesItsBytesBackOnceAndNotAfterItsPeerClosed() {
        PeerReplyBytes bytes = new PeerReplyBytes(10_000, 1_000_000);
        AtomicLong own = bytes.charge(IDLE, 3_000);
        PeerReplyBytes.Tracked reply = new PeerReplyBytes.Tracked(new byte[10], bytes, IDLE, own, 3_000);
        AtomicLong other = bytes.charge(IDLE, 4_000);
        reply.buf();
        reply.buf();
        assertEquals(4_000, bytes.unsent(IDLE), "given back once");
        bytes.closed(IDLE);
        new PeerReplyBytes.Tracked(new byte[10], bytes, IDLE, other, 4_000).buf();
        assertEquals(0, bytes.total(), "not given back twice");
    }

    /** The hook is JeroMQ's encoder reading the last frame: a real ROUTER to DEALER round trip gives every byte back. */
    @Test
    void repliesThroughARealRouterAreGivenBackAsThePeerReadsThem() {
        PeerReplyBytes bytes = new PeerReplyBytes(1L << 30, 1L << 30);
        try (ZContext context = new ZContext(1)) {
            ZMQ.Socket router = context.createSocket(SocketType.ROUTER);
            int port = router.bindToRandomPort("tcp://127.0.0.1");
            ZMQ.Socket dealer = context.createSocket(SocketType.DEALER);
            dealer.setIdentity(new byte[] {7});
            dealer.connect("tcp://127.0.0.1:" + port);
            dealer.send("hello");
            byte[] identity = router.recv();
            router.recv();
            PeerId peer = new PeerId(identity);
            for (int i = 0; i < 100; i++) {
                AtomicLong own = bytes.charge(peer, 10_128);
                router.sendMore(identity);
                router.sendMore(new byte[] {1});
                router.base().send(new PeerReplyBytes.Tracked(new byte[10_000], bytes, peer, own, 10_128), 0);
            }
            for (int i = 0; i < 100; i++) {
                dealer.recv();
                dealer.recv();
            }
            Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> bytes.unsent(peer) == 0);
            assertEquals(0, bytes.total());
        }
    }

    @Test
    void pastTheTotalOnlyShortRepliesGo() {
        PeerReplyBytes bytes = new PeerReplyBytes(1L << 30, 300_000);
        assertNotNull(bytes.charge(IDLE, 200_000));
        assertNull(bytes.charge(READER, 200_000), "a long reply past the total");
        assertNotNull(bytes.charge(READER, 1_000), "a short one still goes");
    }
}
