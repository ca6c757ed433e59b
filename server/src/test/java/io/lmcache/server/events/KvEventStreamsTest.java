package io.lmcache.server.events;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.loop.Outbound;
import io.lmcache.server.loop.ReplyQueue;
import io.lmcache.server.loop.StreamTarget;
import io.lmcache.server.protocol.ReplyEncoder;
import io.lmcache.server.protocol.Request;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** Batches to one stream while records keep coming: at most one per {@link KvEventStreams#LINGER_NS}, a full one at once. */
class KvEventStreamsTest {
    private static final int CHUNK = 4;
    private final AtomicLong clockNs = new AtomicLong(1_000_000_000L);
    private final KvEventLog log = new KvEventLog(64, CHUNK, 7);
    /** What the socket thread's wake-ups drained (it drains the moment it is woken and sleeps again), and how many. */
    private final List<byte[]> received = new ArrayList<>();
    private final int[] wakes = new int[1];
    private final ReplyQueue replies = new ReplyQueue(ReplyQueue.DEFAULT_BUDGET_BYTES, this::drainOnWake);
    private final KvEventStreams streams = new KvEventStreams(log, replies, clockNs::get, () -> { });
    private final byte[] uid = "u1".getBytes(StandardCharsets.US_ASCII);
    private int chunks;

    private void subscribe(long maxEvents) {
        streams.open(new Request.SubscribeKvEvents(1, "m", 0, maxEvents), new StreamTarget(new byte[] {0, 1, 2, 3, 4}, uid, new byte[] {34}));
    }

    private void store() {
        byte[] chain = new byte[32];
        chain[0] = (byte) ++chunks;
        log.stored(KvEventLog.Medium.CPU, "m", chain, 0, new int[CHUNK]);
    }

    private int batchesOut() {
        int n = 0;
        while (replies.poll() != null) {
            n++;
        }
        return n;
    }

    private void ack() {
        streams.control(new StreamTarget(new byte[] {0, 1, 2, 3, 4}, uid, new byte[0]).peer(), uid, "ack".getBytes(StandardCharsets.US_ASCII));
    }

    @Test
    void recordsArrivingWithinTheLingerGoOutAsOneBatch() {
        subscribe(100);
        store();
        streams.doWork();
        assertEquals(1, batchesOut(), "the first batch goes at once");
        ack();
        store();
        store();
        streams.doWork();
        assertEquals(0, batchesOut(), "within the linger nothing more goes out");
        assertEquals(KvEventStreams.LINGER_NS, streams.idleParkNs(), "the agent may park until the linger ends");
        clockNs.addAndGet(KvEventStreams.LINGER_NS);
        store();
        streams.doWork();
        assertEquals(1, batchesOut(), "after the linger the three records go as one batch");
        assertEquals(1 + 1, streams.batches());
    }

    @Test
    void aFullBatchGoesAtOnceAndARecordAfterAQuietSpellToo() {
        subscribe(2);
        store();
        streams.doWork();
        batchesOut();
        ack();
        store();
        store();
        streams.doWork();
        assertEquals(1, batchesOut(), "max_events records waiting: no linger");
        ack();
        clockNs.addAndGet(10 * KvEventStreams.LINGER_NS);
        store();
        streams.doWork();
        assertEquals(1, batchesOut(), "after a quiet spell a record goes at once");
    }

    @Test
    void eachRecordIsEncodedOnceHoweverManyBatchesCarryIt() {
        for (int i = 0; i < 8; i++) {
            byte[] own = ("s" + i).getBytes(StandardCharsets.US_ASCII);
            streams.open(new Request.SubscribeKvEvents(10 + i, "m", 0, 100), new StreamTarget(new byte[] {9, (byte) i}, own, new byte[] {34}));
        }
        store();
        streams.doWork();
        List<byte[]> payloads = drain();
        assertEquals(8, payloads.size(), "every subscriber got the first batch");
        assertEquals(1, streams.encodings(), "its one record encoded once for all eight");
        for (byte[] payload : payloads) {
            assertArrayEquals(payloads.getFirst(), payload);
        }
        // a subscriber that comes later, from the same cursor, in another pass: the record comes from the cache
        streams.open(new Request.SubscribeKvEvents(99, "m", 0, 100), new StreamTarget(new byte[] {9, 99}, uid, new byte[] {34}));
        streams.doWork();
        List<byte[]> late = drain();
        assertEquals(1, late.size());
        assertArrayEquals(new ReplyEncoder().encode(log.read(0, "m", 100)), late.getFirst(), "the bytes of the batch encoded whole");
        assertEquals(1, streams.encodings());
        // the late one acks: a new record goes to it alone, encoded once
        streams.control(new StreamTarget(new byte[] {9, 99}, uid, new byte[0]).peer(), uid, "ack".getBytes(StandardCharsets.US_ASCII));
        clockNs.addAndGet(KvEventStreams.LINGER_NS);
        store();
        streams.doWork();
        assertEquals(1, drain().size());
        assertEquals(2, streams.encodings());
    }

    private void drainOnWake() {
        wakes[0]++;
        replies.awake();
        for (Outbound reply; (reply = replies.poll()) != null; ) {
            received.add(reply.payload());
        }
        replies.prepareToSleep();
    }

    @Test
    void onePassWakesTheSocketThreadOnceHoweverManySubscribersItServes() {
        // a socket thread that drains the moment it is woken and sleeps again: each reply offered alone would wake it anew
        for (int i = 0; i < 8; i++) {
            byte[] own = ("s" + i).getBytes(StandardCharsets.US_ASCII);
            streams.open(new Request.SubscribeKvEvents(10 + i, "m", 0, 100), new StreamTarget(new byte[] {9, (byte) i}, own, new byte[] {34}));
        }
        assertTrue(replies.prepareToSleep());
        store();
        streams.doWork();
        assertEquals(8, received.size(), "every subscriber's first batch");
        assertEquals(1, wakes[0], "one wake-up for the pass");
        assertEquals(8, streams.batches());
    }

    @Test
    void aBatchTheReplyBudgetRefusesIsNotCountedAndGoesAgainWithItsCreditRestored() {
        ReplyQueue tight = new ReplyQueue(4096);
        KvEventStreams own = new KvEventStreams(log, tight, clockNs::get, () -> { });
        own.open(new Request.SubscribeKvEvents(1, "m", 0, 100), new StreamTarget(new byte[] {0, 1, 2, 3, 4}, uid, new byte[] {34}));
        store();
        assertTrue(tight.offer(new Outbound(new byte[1], new byte[1], new byte[1], new byte[3900])), "the queue is all but full");
        own.doWork();
        assertEquals(0, own.batches(), "the refused batch is not counted as sent");
        assertEquals(1, own.batchesDropped());
        assertEquals(1, tight.dropped().sum());
        tight.poll(); // the socket thread drains the queue
        own.doWork();
        assertEquals(null, tight.poll(), "the retry waits a moment: no busy loop on a full queue");
        clockNs.addAndGet(KvEventStreams.RETRY_NS);
        own.doWork();
        Outbound again = tight.poll();
        assertTrue(again != null && again.payload() != null, "the same records go again, without a new ack");
        assertArrayEquals(new ReplyEncoder().encode(log.read(0, "m", 100)), again.payload());
        assertEquals(1, own.batches());
    }

    @Test
    void aBatchThePeerDidNotTakeGoesAgain() {
        subscribe(100);
        store();
        streams.doWork();
        assertEquals(1, batchesOut());
        streams.dropped(new StreamTarget(new byte[] {0, 1, 2, 3, 4}, uid, new byte[0]).peer(), uid);
        streams.doWork();
        assertEquals(0, batchesOut(), "not at once: a peer that does not read is not sent a batch per pass");
        clockNs.addAndGet(KvEventStreams.RETRY_NS);
        streams.doWork();
        List<byte[]> again = drain();
        assertEquals(1, again.size(), "sent again without an ack");
        assertEquals(1, streams.batchesDropped());
    }

    @Test
    void anotherPeerCannotReplaceAStreamByItsInstanceIdButItsOwnConnectionCan() {
        subscribe(100);
        streams.doWork();
        assertEquals(1, batchesOut());
        byte[] intruderUid = "x".getBytes(StandardCharsets.US_ASCII);
        streams.open(new Request.SubscribeKvEvents(1, "m", 0, 100), new StreamTarget(new byte[] {6, 6}, intruderUid, new byte[] {34}));
        Outbound refused = replies.poll();
        assertArrayEquals(new byte[] {6, 6}, refused.identity(), "the intruder gets its final reply at once");
        assertEquals(null, refused.payload());
        assertEquals(1, streams.endedCounter(KvEventStreams.Ended.REFUSED).sum());
        assertEquals(0, streams.endedCounter(KvEventStreams.Ended.REPLACED).sum(), "the owner's stream goes on");
        assertEquals(1, streams.subscribers());
        byte[] second = "u2".getBytes(StandardCharsets.US_ASCII);
        streams.open(new Request.SubscribeKvEvents(1, "m", 0, 100), new StreamTarget(new byte[] {0, 1, 2, 3, 4}, second, new byte[] {34}));
        assertEquals(1, streams.endedCounter(KvEventStreams.Ended.REPLACED).sum(), "its own connection replaces it");
    }

    @Test
    void aReconnectingSubscriberWhoseOldConnectionClosedTakesItsInstanceBack() {
        subscribe(100);
        streams.connectionClosed(new StreamTarget(new byte[] {0, 1, 2, 3, 4}, uid, new byte[0]).peer());
        // the new connection's subscription comes before the agent's next pass
        streams.open(new Request.SubscribeKvEvents(1, "m", 0, 100), new StreamTarget(new byte[] {8, 8}, uid, new byte[] {34}));
        assertEquals(0, streams.endedCounter(KvEventStreams.Ended.REFUSED).sum());
        assertEquals(1, streams.endedCounter(KvEventStreams.Ended.CONNECTION_CLOSED).sum());
        streams.doWork();
        assertEquals(1, streams.subscribers(), "the new stream lives on");
    }

    @Test
    void aClosedConnectionsStreamsEndAndAPeerHoldsAtMostItsShare() {
        byte[] peer = {0, 1, 2, 3, 4};
        for (int i = 0; i < KvEventStreams.MAX_PER_PEER + 2; i++) {
            byte[] own = ("s" + i).getBytes(StandardCharsets.US_ASCII);
            streams.open(new Request.SubscribeKvEvents(100 + i, "m", 0, 100), new StreamTarget(peer, own, new byte[] {34}));
        }
        assertEquals(KvEventStreams.MAX_PER_PEER, streams.subscribers());
        assertEquals(2, streams.endedCounter(KvEventStreams.Ended.REFUSED).sum());
        streams.open(new Request.SubscribeKvEvents(7, "x".repeat(KvEventStreams.MAX_MODEL_CHARS + 1), 0, 100),
                new StreamTarget(new byte[] {5}, uid, new byte[] {34}));
        assertEquals(3, streams.endedCounter(KvEventStreams.Ended.REFUSED).sum(), "a model name past the bound is not kept");
        streams.connectionClosed(new StreamTarget(peer, uid, new byte[0]).peer());
        streams.doWork();
        assertEquals(0, streams.subscribers());
        assertEquals(KvEventStreams.MAX_PER_PEER, streams.endedCounter(KvEventStreams.Ended.CONNECTION_CLOSED).sum());
    }

    private List<byte[]> drain() {
        List<byte[]> payloads = new ArrayList<>();
        for (Outbound reply; (reply = replies.poll()) != null; ) {
            payloads.add(reply.payload());
        }
        return payloads;
    }
}
