package io.lmcache.server.loop;

import static io.lmcache.server.testing.TestClient.pack;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.metrics.LivenessCatalogue;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestDecoder;
import io.lmcache.server.testing.Inbounds;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The transfer lanes' deadline, on a dispatcher with one transfer thread (a host without a GPU has one): a registration still
 * running is answered once, with its failure value, and its peer's later requests go on on a fresh thread, as do other
 * peers'; a request whose reply must follow its work (the STORE-like op here) is never answered early.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class LaneDeadlineTest {
    private static final Duration BOUND = Duration.ofSeconds(10);
    private static final byte[] FAILURE = {(byte) 0xc2};
    private static final byte[] SUCCESS = {(byte) 0xc3};

    /** Instance ids (UNREGISTER, the registration here) and request ids (END_SESSION, the lane op) whose handler blocks. */
    private final Map<Object, CountDownLatch> blocked = new ConcurrentHashMap<>();
    private final CountDownLatch release = new CountDownLatch(1);
    private final List<Object> started = Collections.synchronizedList(new ArrayList<>());
    private final List<Thread> threads = Collections.synchronizedList(new ArrayList<>());
    private final ReplyQueue replies = new ReplyQueue();
    private final ServerMetrics metrics = new ServerMetrics();
    private final Dispatcher dispatcher = new Dispatcher(table(), replies, metrics, 1, 1, 0);
    private int nextUid;

    private OpTable table() {
        OpTable.Builder b = OpTable.builder()
                .registration(Op.UNREGISTER_KV_CACHE, RequestDecoder::unregisterKvCache, this::handle, Reply.FALSE)
                .op(Op.END_SESSION, HandlerKind.AFFINITY, RequestDecoder::endSession, this::handle, Reply.FALSE);
        Set<Op> declared = EnumSet.of(Op.UNREGISTER_KV_CACHE, Op.END_SESSION);
        b.unsupported("not under test", EnumSet.complementOf(EnumSet.copyOf(declared)).toArray(Op[]::new));
        return b.build();
    }

    private Reply handle(Request request, PeerId peer) throws InterruptedException {
        Object id = switch (request) {
            case Request.UnregisterKvCache u -> u.instanceId();
            case Request.EndSession e -> e.requestId();
            default -> throw new IllegalStateException("not under test: " + request);
        };
        threads.add(Thread.currentThread());
        started.add(id);
        if (blocked.containsKey(id)) {
            blocked.get(id).countDown();
            release.await(); // a call that does not return until the test lets it
        }
        return Reply.TRUE;
    }

    @AfterEach
    void close() throws InterruptedException {
        release.countDown();
        dispatcher.close();
    }

    @Test
    void aStalledRegistrationIsAnsweredOnceWithItsFailureValueAndItsLaneGoesOn() throws Exception {
        CountDownLatch inHandler = block(7L);
        Inbound stuck = unregister(PEER_A, 7);
        dispatcher.dispatch(stuck);
        assertTrue(inHandler.await(BOUND.toSeconds(), TimeUnit.SECONDS));
        Inbound behind = endSession(PEER_A, "next");
        dispatcher.dispatch(behind);
        Inbound otherPeer = endSession(PEER_B, "other");
        dispatcher.dispatch(otherPeer);
        assertNull(replies.poll(), "the one transfer thread is in the stalled registration: nothing else runs");

        KeyedSerialExecutor.Running<PeerId> running = stalled();
        assertTrue(dispatcher.answerStalled(running));
        assertReply(stuck, FAILURE, replies.poll());
        Map<String, byte[]> later = awaitReplies(2);
        assertArrayEquals(SUCCESS, later.get(uid(behind)), "the peer's next request ran, on a fresh thread");
        assertArrayEquals(SUCCESS, later.get(uid(otherPeer)), "another peer's request ran");
        assertEquals(Set.of(7L, "next", "other"), Set.copyOf(started), "the two lanes' requests, in either order");
        assertTrue(threads.get(started.indexOf("next")) != threads.get(0), "the peer's next request ran on another thread");
        assertEquals(1.0, counter(LivenessCatalogue.TRANSFER_LANE_DEADLINE_ANSWERS));
        assertEquals(1.0, abandonedThreads());
        assertEquals(0, dispatcher.inflight(), "all three answered");
        assertFalse(dispatcher.answerStalled(running), "answered once");

        release.countDown();
        await().atMost(BOUND).until(() -> abandonedThreads() == 0.0);
        assertNull(replies.poll(), "its late return is not answered again");
        assertEquals(0, dispatcher.inflight());
        Inbound afterwards = endSession(PEER_A, "afterwards");
        dispatcher.dispatch(afterwards);
        assertReply(afterwards, SUCCESS, awaitReply());
    }

    @Test
    void aStalledStoreLikeRequestIsNeverAnsweredEarly() throws Exception {
        CountDownLatch inHandler = block("copy");
        Inbound stuck = endSession(PEER_A, "copy");
        dispatcher.dispatch(stuck);
        assertTrue(inHandler.await(BOUND.toSeconds(), TimeUnit.SECONDS));
        dispatcher.dispatch(endSession(PEER_A, "behind"));

        assertFalse(dispatcher.answerStalled(stalled()), "its reply must follow its work");
        assertNull(replies.poll());
        assertEquals(0.0, counter(LivenessCatalogue.TRANSFER_LANE_DEADLINE_ANSWERS));
        assertEquals(0.0, abandonedThreads());
        assertEquals(List.of("copy"), List.copyOf(started), "the lane still waits for it");

        release.countDown();
        assertReply(stuck, SUCCESS, awaitReply());
        assertNotNull(awaitReply(), "then the one behind it");
    }

    @Test
    void pastTheCapOfAbandonedThreadsAStalledRegistrationIsAnsweredButItsLaneWaits() throws Exception {
        int peers = Dispatcher.MAX_ABANDONED_THREADS + 1;
        for (int i = 0; i < peers; i++) {
            CountDownLatch inHandler = block((long) i);
            dispatcher.dispatch(unregister(new byte[] {9, (byte) i}, i));
            assertTrue(inHandler.await(BOUND.toSeconds(), TimeUnit.SECONDS), "registration " + i + " runs");
            assertTrue(dispatcher.answerStalled(stalledOf((long) i)));
            assertNotNull(awaitReply(), "registration " + i + " answered");
        }
        assertEquals(Dispatcher.MAX_ABANDONED_THREADS, abandonedThreads());
        assertEquals(1.0, counter(LivenessCatalogue.TRANSFER_LANE_ABANDON_CAP_HITS));
        Inbound behindLast = endSession(new byte[] {9, (byte) (peers - 1)}, "behind");
        dispatcher.dispatch(behindLast);
        assertNull(replies.poll(), "the last one's lane was not freed: its next request waits");
        assertFalse(started.contains("behind"));

        release.countDown();
        assertReply(behindLast, SUCCESS, awaitReply());
        await().atMost(BOUND).until(() -> abandonedThreads() == 0.0);
        assertNull(replies.poll(), "no late return answered again");
    }

    private static final byte[] PEER_A = {1};
    private static final byte[] PEER_B = {2};

    private CountDownLatch block(Object id) {
        CountDownLatch inHandler = new CountDownLatch(1);
        blocked.put(id, inHandler);
        return inHandler;
    }

    /** The one lane task running now. */
    private KeyedSerialExecutor.Running<PeerId> stalled() {
        List<KeyedSerialExecutor.Running<PeerId>> running = dispatcher.transfersRunningSince(System.nanoTime());
        assertEquals(1, running.size(), running.toString());
        return running.getFirst();
    }

    /** The running task that started last: the registration just dispatched (the others were abandoned before it). */
    private KeyedSerialExecutor.Running<PeerId> stalledOf(Object id) {
        await().atMost(BOUND).until(() -> started.contains(id));
        return dispatcher.transfersRunningSince(System.nanoTime()).stream()
                .max((a, b) -> Long.compare(a.startedNs(), b.startedNs())).orElseThrow();
    }

    private Outbound awaitReply() {
        Outbound[] reply = new Outbound[1];
        await().atMost(BOUND).until(() -> (reply[0] = replies.poll()) != null);
        return reply[0];
    }

    private Map<String, byte[]> awaitReplies(int count) {
        Map<String, byte[]> byUid = new ConcurrentHashMap<>();
        for (int i = 0; i < count; i++) {
            Outbound reply = awaitReply();
            byUid.put(HexFormat.of().formatHex(reply.uid()), reply.payload());
        }
        return byUid;
    }

    private static String uid(Inbound in) {
        return HexFormat.of().formatHex(in.uid());
    }

    private static void assertReply(Inbound in, byte[] payload, Outbound reply) {
        assertNotNull(reply);
        assertArrayEquals(in.uid(), reply.uid());
        assertArrayEquals(payload, reply.payload());
    }

    private double counter(LivenessCatalogue entry) {
        return metrics.declare(entry).sum();
    }

    private double abandonedThreads() {
        return metrics.registry().get("lmcache_mp.transfer_threads_abandoned").gauge().value();
    }

    private Inbound unregister(byte[] peer, long instanceId) {
        return Inbounds.from(peer, Op.UNREGISTER_KV_CACHE, nextUid++, pack(p -> p.packLong(instanceId)));
    }

    private Inbound endSession(byte[] peer, String requestId) {
        return Inbounds.from(peer, Op.END_SESSION, nextUid++, pack(p -> p.packString(requestId)));
    }
}
