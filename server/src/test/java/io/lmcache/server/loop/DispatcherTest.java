package io.lmcache.server.loop;

import static io.lmcache.server.testing.TestClient.pack;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestDecoder;
import io.lmcache.server.testing.Inbounds;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Where the dispatcher runs each request: lookup-family requests on the calling (socket) thread
 * when they are small and the CPU pool holds nothing earlier, the CPU pool otherwise, so that a
 * quick request never overtakes one sent before it.
 */
class DispatcherTest {
    private record Handled(Op op, Thread thread) {}

    private final List<Handled> handled = new ArrayList<>();
    private final CountDownLatch clearMayFinish = new CountDownLatch(1);
    private final ReplyQueue replies = new ReplyQueue();
    private final ServerMetrics metrics = new ServerMetrics();
    private final Dispatcher dispatcher = new Dispatcher(table(), replies, metrics, 1, 1, 0);
    private int nextUid;

    /** The kinds the server's modules declare for these ops, every op handled by {@link #handle}; the others unsupported. */
    private OpTable table() {
        OpTable.Builder b = OpTable.builder()
                .op(Op.LOOKUP, HandlerKind.QUICK, RequestDecoder::lookup, this::handle, Reply.NONE)
                .op(Op.END_SESSION, HandlerKind.QUICK, RequestDecoder::endSession, this::handle, Reply.NONE)
                .op(Op.QUERY_PREFETCH_STATUS, HandlerKind.QUICK, RequestDecoder::queryPrefetchStatus, this::handle, Reply.NONE)
                .op(Op.CLEAR, HandlerKind.NORMAL, RequestDecoder::clear, this::handle, Reply.NONE)
                .op(Op.PING, HandlerKind.SYNC, RequestDecoder::ping, this::handle, Reply.TRUE);
        Set<Op> declared = EnumSet.of(Op.LOOKUP, Op.END_SESSION, Op.QUERY_PREFETCH_STATUS, Op.CLEAR, Op.PING);
        b.unsupported("not under test", EnumSet.complementOf(EnumSet.copyOf(declared)).toArray(Op[]::new));
        return b.build();
    }

    private Reply handle(Request request, PeerId peer) throws InterruptedException {
        synchronized (handled) {
            handled.add(new Handled(request.op(), Thread.currentThread()));
        }
        if (request instanceof Request.Clear && !clearMayFinish.await(10, TimeUnit.SECONDS)) {
            throw new IllegalStateException("the test never released CLEAR");
        }
        return Reply.NONE;
    }

    @AfterEach
    void close() throws InterruptedException {
        clearMayFinish.countDown();
        dispatcher.close();
    }

    @Test
    void smallLookupFamilyRequestsAndPingAreAnsweredOnTheCallingThread() {
        for (Inbound in : List.of(lookup(512), endSession("req-1"), queryPrefetchStatus("req-1"), ping())) {
            dispatcher.dispatch(in);
            Outbound reply = replies.poll();
            assertNotNull(reply, in.op() + " answered before dispatch returned");
            assertSame(in.uid(), reply.uid());
            assertSame(Thread.currentThread(), last().thread(), in.op() + " ran on the calling thread");
        }
        assertEquals(0, dispatcher.inflight());
        assertEquals(1.0, inlineCount(Op.LOOKUP));
        assertEquals(1.0, inlineCount(Op.END_SESSION));
    }

    @Test
    void aLookupNeverOvertakesAnEarlierRequestWaitingInTheCpuPool() {
        dispatcher.dispatch(clear());
        await().atMost(Duration.ofSeconds(5)).until(() -> handledOps().contains(Op.CLEAR));
        dispatcher.dispatch(endSession("req-1"));
        dispatcher.dispatch(lookup(512));

        assertNull(replies.poll(), "nothing may be answered while CLEAR holds the pool");
        assertEquals(List.of(Op.CLEAR), handledOps(), "the END_SESSION and the LOOKUP wait behind CLEAR");

        clearMayFinish.countDown();
        await().atMost(Duration.ofSeconds(5)).until(() -> dispatcher.inflight() == 0);
        assertEquals(List.of(Op.CLEAR, Op.END_SESSION, Op.LOOKUP), handledOps(), "sent order kept");
        for (Handled h : handled) {
            assertNotSame(Thread.currentThread(), h.thread(), h.op() + " ran on the pool");
        }
        assertEquals(0.0, inlineCount(Op.LOOKUP));

        // with the pool empty again, the next one is answered inline
        await().atMost(Duration.ofSeconds(5)).untilAsserted(() -> {
            dispatcher.dispatch(lookup(512));
            assertSame(Thread.currentThread(), last().thread());
        });
    }

    @Test
    void aLookupWithALongPromptGoesToTheCpuPool() {
        Inbound big = lookup(8_192);
        assertTrue(big.payloadBytes() > Dispatcher.QUICK_INLINE_MAX_PAYLOAD_BYTES, "the test's prompt must exceed the inline limit");
        dispatcher.dispatch(big);
        await().atMost(Duration.ofSeconds(5)).until(() -> dispatcher.inflight() == 0);
        assertNotSame(Thread.currentThread(), last().thread());
        assertTrue(last().thread().getName().startsWith("lmcache-normal"), last().thread().getName());
        assertNotNull(replies.poll(), "answered from the pool");
        assertEquals(0.0, inlineCount(Op.LOOKUP));
    }

    @Test
    void anUnsupportedOpIsCountedAndNeverAnswered() {
        dispatcher.dispatch(inbound(Op.POLL_KV_EVENTS));
        dispatcher.dispatch(inbound(Op.POLL_KV_EVENTS));
        assertNull(replies.poll(), "no reply: the client treats the feature as unavailable");
        assertEquals(0, dispatcher.inflight());
        assertEquals(2.0, metrics.registry().get("lmcache_mp.unsupported_ops").tag("op", "poll_kv_events").functionCounter().count());
        assertTrue(handledOps().isEmpty(), "no handler ran");
    }

    private double inlineCount(Op op) {
        return metrics.registry().get("lmcache_mp.requests_inline").tag("op", op.wireName()).functionCounter().count();
    }

    private Handled last() {
        synchronized (handled) {
            return handled.getLast();
        }
    }

    private List<Op> handledOps() {
        synchronized (handled) {
            return handled.stream().map(Handled::op).toList();
        }
    }

    private Inbound lookup(int tokens) {
        byte[] key = pack(p -> {
            p.packMapHeader(9);
            p.packString("model_name").packString("test-model");
            p.packString("world_size").packInt(1);
            p.packString("worker_id").packNil();
            p.packString("token_ids").packArrayHeader(tokens);
            for (int i = 0; i < tokens; i++) {
                p.packInt(100_000 + i); // uint32-encoded, like vocabulary-sized ids
            }
            p.packString("start").packInt(0);
            p.packString("end").packInt(tokens);
            p.packString("request_id").packString("req-1");
            p.packString("cache_salt").packString("");
            p.packString("num_kv_readers").packInt(1);
        });
        return inbound(Op.LOOKUP, key, pack(p -> p.packInt(1)));
    }

    private Inbound endSession(String requestId) {
        return inbound(Op.END_SESSION, pack(p -> p.packString(requestId)));
    }

    private Inbound queryPrefetchStatus(String requestId) {
        return inbound(Op.QUERY_PREFETCH_STATUS, pack(p -> p.packString(requestId)));
    }

    private Inbound clear() {
        return inbound(Op.CLEAR, pack(p -> p.packBoolean(false)));
    }

    private Inbound ping() {
        return inbound(Op.PING, pack(p -> p.packLong(42)));
    }

    private Inbound inbound(Op op, byte[]... payloads) {
        return Inbounds.of(op, nextUid++, payloads);
    }
}
