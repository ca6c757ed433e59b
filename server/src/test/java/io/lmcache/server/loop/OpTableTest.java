package io.lmcache.server.loop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestDecoder;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The builder's guarantees: one entry per op, no op left out, and module-bound or disabled handlers. */
class OpTableTest {
    private static final PeerId PEER = new PeerId(new byte[] {1});

    /** A module stand-in that records what reached it. */
    private record Recorder(List<Long> unregistered) {}

    @Test
    void aMissingOpFailsTheBuildNamingIt() {
        OpTable.Builder b = OpTable.builder();
        b.unsupported("test", EnumSet.complementOf(EnumSet.of(Op.POLL_KV_EVENTS, Op.STORE_Q)).toArray(Op[]::new));
        IllegalStateException e = assertThrows(IllegalStateException.class, b::build);
        assertTrue(e.getMessage().contains("poll_kv_events (op 34)"), e.getMessage());
        assertTrue(e.getMessage().contains("store_q (op 5)"), e.getMessage());
        assertEquals(1, e.getMessage().lines().count(), "one line");
    }

    @Test
    void anOpDeclaredTwiceIsRefused() {
        OpTable.Builder b = OpTable.builder().op(Op.NOOP, HandlerKind.SYNC, RequestDecoder::noop, (r, peer) -> Reply.NONE, Reply.NONE);
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> b.op(Op.NOOP, HandlerKind.SYNC, RequestDecoder::noop, (r, peer) -> Reply.NONE, Reply.NONE));
        assertTrue(e.getMessage().contains("noop"), e.getMessage());
        assertThrows(IllegalStateException.class, () -> b.unsupported("test", Op.NOOP));
    }

    @Test
    void anOpWithoutAPayloadCountCannotBeServed() {
        assertEquals(Op.NOT_DECODED, Op.STORE_Q.maxPayloads(), "an op of a feature left out has no count");
        assertThrows(IllegalArgumentException.class,
                () -> OpTable.builder().op(Op.STORE_Q, HandlerKind.SYNC, RequestDecoder::noop, (r, peer) -> Reply.NONE, Reply.NONE));
    }

    @Test
    void entriesAreFoundByOp() throws Exception {
        Recorder module = new Recorder(new ArrayList<>());
        OpTable.Builder b = OpTable.builder();
        b.module(module).op(Op.UNREGISTER_KV_CACHE, HandlerKind.SYNC, RequestDecoder::unregisterKvCache,
                (m, r, peer) -> {
                    m.unregistered().add(r.instanceId());
                    return Reply.TRUE;
                }, Reply.NONE);
        b.unsupported("test", EnumSet.complementOf(EnumSet.of(Op.UNREGISTER_KV_CACHE)).toArray(Op[]::new));
        OpTable table = b.build();

        OpEntry.Handled<?> entry = assertInstanceOf(OpEntry.Handled.class, table.entry(Op.UNREGISTER_KV_CACHE));
        assertSame(Reply.TRUE, handle(entry, new Request.UnregisterKvCache(7)));
        assertEquals(List.of(7L), module.unregistered(), "the handler ran on the bound module");
        OpEntry.Unsupported unsupported = assertInstanceOf(OpEntry.Unsupported.class, table.entry(Op.STORE));
        assertEquals(Op.STORE, unsupported.op());
        assertEquals("test", unsupported.feature());
    }

    @Test
    void aDisabledModuleAnswersEveryOpWithItsFailureValue() throws Exception {
        OpTable.Builder b = OpTable.builder();
        b.<Recorder>disabled("lmcache_driven")
                .op(Op.UNREGISTER_KV_CACHE, HandlerKind.SYNC, RequestDecoder::unregisterKvCache, (m, r, peer) -> {
                    throw new AssertionError("a disabled module's handler never runs");
                }, Reply.NONE)
                .op(Op.STORE, HandlerKind.AFFINITY, RequestDecoder::store, (m, r, peer) -> {
                    throw new AssertionError("a disabled module's handler never runs");
                }, FailureReplies.TRANSFER_FAILED);
        b.unsupported("test", EnumSet.complementOf(EnumSet.of(Op.UNREGISTER_KV_CACHE, Op.STORE)).toArray(Op[]::new));
        OpTable table = b.build();

        OpEntry.Handled<?> unregister = assertInstanceOf(OpEntry.Handled.class, table.entry(Op.UNREGISTER_KV_CACHE));
        OpEntry.Handled<?> store = assertInstanceOf(OpEntry.Handled.class, table.entry(Op.STORE));
        for (int i = 0; i < 3; i++) {
            assertSame(Reply.NONE, handle(unregister, new Request.UnregisterKvCache(7)));
            assertSame(FailureReplies.TRANSFER_FAILED, handle(store, null));
        }
        assertEquals(HandlerKind.AFFINITY, store.kind(), "a disabled op keeps its kind and arity");
        assertEquals(4, store.maxPayloads());
    }

    @SuppressWarnings("unchecked")
    private static Reply handle(OpEntry.Handled<?> entry, Request request) throws Exception {
        return ((RequestHandler<Request>) entry.handler()).handle(request, PEER);
    }
}
