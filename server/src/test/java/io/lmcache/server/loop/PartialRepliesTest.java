package io.lmcache.server.loop;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.ReplyEncoder;
import io.lmcache.server.protocol.RequestDecoder;
import io.lmcache.server.testing.Inbounds;
import java.util.EnumSet;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * An op answered with several frames under one uid (LMCache's {@code HandlerType.STREAMING}, RETRIEVE_LAYERWISE's layer
 * batches): the handler's intermediate frames go out in order, each under the request's uid and op frame, before the reply it
 * returns; a disabled module answers with the failure value alone.
 */
class PartialRepliesTest {
    private static final Reply FIRST = new Reply.LayerwiseFrame(new byte[] {0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}, false, false);
    private static final Reply SECOND = new Reply.LayerwiseFrame(new byte[] {2, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0}, false, false);
    private static final Reply LAST = new Reply.LayerwiseFrame(new byte[0], true, true);
    private static final Reply FAILURE = new Reply.LayerwiseFrame(new byte[0], true, false);

    private static Dispatcher dispatcher(ReplyQueue replies, boolean live) {
        OpTable.Builder b = OpTable.builder();
        OpTable.ModuleOps<Object> ops = live ? b.module(new Object()) : b.disabled("under test");
        ops.partialsOp(Op.PING, HandlerKind.SYNC, RequestDecoder::ping, (module, request, peer, partials) -> {
            partials.send(FIRST);
            partials.send(SECOND);
            return LAST;
        }, FAILURE);
        b.unsupported("not under test", EnumSet.complementOf(EnumSet.of(Op.PING)).toArray(Op[]::new));
        return new Dispatcher(b.build(), replies, new ServerMetrics(), 1, 1, 0);
    }

    @Test
    void theIntermediateFramesGoOutUnderTheRequestsUidBeforeItsReply() throws InterruptedException {
        ReplyQueue replies = new ReplyQueue();
        try (Dispatcher dispatcher = dispatcher(replies, true)) {
            Inbound in = Inbounds.of(Op.PING, 7);
            dispatcher.dispatch(in);
            ReplyEncoder encoder = new ReplyEncoder();
            for (Reply expected : List.of(FIRST, SECOND, LAST)) {
                Outbound frame = replies.poll();
                assertNotNull(frame, "frame " + expected);
                assertSame(in.uid(), frame.uid());
                assertSame(in.opFrame(), frame.op());
                assertArrayEquals(encoder.encode(expected), frame.payload());
            }
            assertNull(replies.poll(), "nothing after the last reply");
        }
    }

    @Test
    void aDisabledModuleAnswersWithTheFailureValueAlone() throws InterruptedException {
        ReplyQueue replies = new ReplyQueue();
        try (Dispatcher dispatcher = dispatcher(replies, false)) {
            dispatcher.dispatch(Inbounds.of(Op.PING, 8));
            assertArrayEquals(new ReplyEncoder().encode(FAILURE), replies.poll().payload());
            assertNull(replies.poll());
        }
    }
}
