package io.lmcache.server.module;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.lmcache.server.cuda.GpuBackend;
import io.lmcache.server.events.KvEventLog;
import io.lmcache.server.events.KvEventRecorder;
import io.lmcache.server.events.KvEventStreams;
import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.loop.HandlerKind;
import io.lmcache.server.loop.OpEntry;
import io.lmcache.server.loop.OpTable;
import io.lmcache.server.loop.ReplyQueue;
import io.lmcache.server.loop.RequestHandler;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.ProtocolException;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.ReplyEncoder;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestDecoder;
import io.lmcache.server.protocol.testing.Golden;
import java.io.IOException;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * The server's op table as the modules declare it: complete, and with the facts the six tables it
 * replaced gave (pinned below), so the refactor changed no kind, arity or failure byte.
 */
class ServerOpsTest {
    private static final int CHUNK_SIZE = 256;
    /** {@code [bin(64 zero bytes), false]} */
    private static final String TRANSFER_FAILED_HEX = "92c440" + "00".repeat(64) + "c2";

    /** A failed poll with the log on (kv-events.md §10.10): a loss at the newest record; incarnation 7, nothing stored. */
    private static final String POLL_FAILED_HEX = "85a7656e61626c6564c3ab696e6361726e6174696f6e07ab6e6578745f637572736f7200a46c6f7374c3a66576656e747390";

    /**
     * Dumped from {@code HandlerKind.of}, {@code RequestDecoder.maxPayloads} and {@code FailureReplies.forOp} (chunk size
     * 256) at bc769fb, before they were removed: kind, payload frames, failure reply as encoded (empty = no frame).
     * One deliberate change since: REGISTER_KV_CACHE and UNREGISTER_KV_CACHE moved from SYNC to the worker's
     * transfer lane (issue 12: no driver call that can block runs on the socket thread). STORE and RETRIEVE's value is
     * the host-only backend's: on a CUDA host it carries the GPU's complete event instead (TransferFailureEventsTest).
     */
    private static final List<Fact> OLD_FACTS = List.of(
            served(Op.REGISTER_KV_CACHE, HandlerKind.AFFINITY, 7, ""),
            served(Op.UNREGISTER_KV_CACHE, HandlerKind.AFFINITY, 1, ""),
            unsupported(Op.REGISTER_Q_CACHE),
            unsupported(Op.UNREGISTER_Q_CACHE),
            unsupported(Op.STORE_Q),
            served(Op.STORE, HandlerKind.AFFINITY, 4, TRANSFER_FAILED_HEX),
            served(Op.RETRIEVE, HandlerKind.AFFINITY, 5, TRANSFER_FAILED_HEX),
            served(Op.LOOKUP, HandlerKind.QUICK, 2, ""),
            served(Op.QUERY_PREFETCH_STATUS, HandlerKind.QUICK, 1, "00"),
            served(Op.WAIT_PREFETCH_STATUS, HandlerKind.NORMAL, 2, "00"),
            served(Op.QUERY_PREFETCH_LOOKUP_HITS, HandlerKind.QUICK, 1, "00"),
            served(Op.FREE_LOOKUP_LOCKS, HandlerKind.QUICK, 2, ""),
            served(Op.END_SESSION, HandlerKind.QUICK, 2, ""),
            served(Op.REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT, HandlerKind.SYNC, 1, "82a873686d5f6e616d65a0a9706f6f6c5f73697a6500"),
            served(Op.UNREGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT, HandlerKind.SYNC, 1, ""),
            served(Op.PREPARE_STORE, HandlerKind.NORMAL, 2, "81a7636f6e7465787482a5736c6f747390ad6368756e6b5f696e646963657390"),
            served(Op.COMMIT_STORE, HandlerKind.NORMAL, 3, "c2"),
            served(Op.PREPARE_RETRIEVE, HandlerKind.NORMAL, 2, "83a773756363657373c2a464617461c400a7636f6e7465787480"),
            served(Op.COMMIT_RETRIEVE, HandlerKind.NORMAL, 2, "c2"),
            served(Op.CLEAR, HandlerKind.NORMAL, 1, ""),
            served(Op.GET_CHUNK_SIZE, HandlerKind.SYNC, 0, "cd0100"),
            served(Op.PING, HandlerKind.SYNC, 1, "c3"),
            served(Op.REPORT_BLOCK_ALLOCATION, HandlerKind.NORMAL, 3, ""),
            served(Op.NOOP, HandlerKind.SYNC, 0, "a24f4b"),
            unsupported(Op.CB_REGISTER_ROPE),
            unsupported(Op.CB_UNREGISTER_ROPE),
            unsupported(Op.CB_RETRIEVE_PRE_COMPUTED),
            unsupported(Op.CB_UNIFIED_LOOKUP),
            unsupported(Op.P2P_LOOKUP_AND_LOCK),
            unsupported(Op.P2P_QUERY_LOOKUP_RESULTS),
            unsupported(Op.P2P_UNLOCK_OBJECTS),
            served(Op.GET_EXPERIMENTAL, HandlerKind.SYNC, 0, "90"),
            unsupported(Op.CB_PROTOCOL_HANDSHAKE),
            served(Op.POLL_KV_EVENTS, HandlerKind.BACKGROUND, 3, POLL_FAILED_HEX),
            streamed(Op.SUBSCRIBE_KV_EVENTS),
            served(Op.REGISTER_LAYERWISE_IPC_EVENT_POOL, HandlerKind.AFFINITY, 1, "920090"),
            served(Op.RETRIEVE_LAYERWISE, HandlerKind.AFFINITY, 5, "93c400c3c2"));

    private record Fact(Op op, boolean served, HandlerKind kind, int maxPayloads, String failureHex) {}

    private static Fact streamed(Op op) {
        return new Fact(op, true, null, -1, "");
    }

    private static Fact served(Op op, HandlerKind kind, int maxPayloads, String failureHex) {
        return new Fact(op, true, kind, maxPayloads, failureHex);
    }

    private static Fact unsupported(Op op) {
        return new Fact(op, false, null, 0, "");
    }

    private final OpTable table = table();

    /** The modules that declare ops, built without the parts their handlers use (this test never runs them). */
    private static OpTable table() {
        ManagementModule management = new ManagementModule(CHUNK_SIZE, null, List.of(), null, Map.of());
        LookupModule lookup = new LookupModule(CHUNK_SIZE, null, null, null, null, null);
        EventKinds events = new EventKinds(GpuBackend.none(), FailureReplies.hostOnly(), new ServerMetrics(), false);
        return ServerOps.table(management, lookup, kvEvents(), Optional.empty(), Optional.empty(), events);
    }

    /** The KV-event module over a log of 8 records, incarnation 7. */
    static KvEventModule kvEvents() {
        KvEventRecorder recorder = new KvEventRecorder(new KvEventLog(8, CHUNK_SIZE, 7), false);
        return new KvEventModule(recorder, new KvEventStreams(recorder.log(), new ReplyQueue(), System::nanoTime, () -> { }));
    }

    @Test
    void onlyTheRegistrationsAreAnsweredAtTheLanesDeadline() {
        Set<Op> answered = EnumSet.noneOf(Op.class);
        for (Op op : Op.values()) {
            if (table.entry(op) instanceof OpEntry.Handled<?> handled && handled.answeredAtDeadline()) {
                answered.add(op);
                assertEquals(HandlerKind.AFFINITY, handled.kind(), op + " runs on the worker's lane");
            }
        }
        assertEquals(EnumSet.of(Op.REGISTER_KV_CACHE, Op.UNREGISTER_KV_CACHE, Op.REGISTER_LAYERWISE_IPC_EVENT_POOL), answered,
                "a STORE's or RETRIEVE's reply must follow its copy: never answered early");
    }

    @Test
    void everyOpHasAnEntryWithTheFactsTheOldTablesGave() {
        assertEquals(Op.values().length, OLD_FACTS.size());
        ReplyEncoder encoder = new ReplyEncoder();
        for (Fact fact : OLD_FACTS) {
            OpEntry entry = table.entry(fact.op());
            assertEquals(fact.op(), entry.op());
            if (!fact.served()) {
                assertInstanceOf(OpEntry.Unsupported.class, entry, fact.op() + " is unsupported");
                continue;
            }
            if (fact.maxPayloads() < 0) {
                assertInstanceOf(OpEntry.Streamed.class, entry, fact.op() + " is a stream");
                continue;
            }
            OpEntry.Handled<?> handled = assertInstanceOf(OpEntry.Handled.class, entry, fact.op() + " is served");
            assertEquals(fact.kind(), handled.kind(), fact.op() + " kind");
            assertEquals(fact.maxPayloads(), handled.maxPayloads(), fact.op() + " payload frames");
            byte[] failure = encoder.encode(handled.failure().get());
            assertEquals(fact.failureHex(), failure == null ? "" : HexFormat.of().formatHex(failure), fact.op() + " failure value");
        }
    }

    @Test
    void unsupportedOpsAreTheFeaturesThisServerLacks() {
        Set<Op> unsupported = EnumSet.noneOf(Op.class);
        for (Op op : Op.values()) {
            if (table.entry(op) instanceof OpEntry.Unsupported) {
                unsupported.add(op);
            }
        }
        assertEquals(EnumSet.of(Op.REGISTER_Q_CACHE, Op.UNREGISTER_Q_CACHE, Op.STORE_Q, Op.CB_REGISTER_ROPE, Op.CB_UNREGISTER_ROPE,
                Op.CB_RETRIEVE_PRE_COMPUTED, Op.CB_UNIFIED_LOOKUP, Op.CB_PROTOCOL_HANDSHAKE, Op.P2P_LOOKUP_AND_LOCK,
                Op.P2P_QUERY_LOOKUP_RESULTS, Op.P2P_UNLOCK_OBJECTS), unsupported);
    }

    @Test
    void everyGoldenRequestDecodesThroughItsEntry() throws Exception {
        RequestDecoder decoder = new RequestDecoder();
        Set<Op> seen = EnumSet.noneOf(Op.class);
        for (Golden.Message m : Golden.loadAll()) {
            if (!m.clientToServer()) {
                continue;
            }
            Op op = decoder.decodeOp(m.frames()[1]);
            OpEntry.Handled<?> entry = assertInstanceOf(OpEntry.Handled.class, table.entry(op), m.toString());
            Request request = entry.decoder().decode(decoder, m.frames(), 2, 2 + Math.min(m.payloadCount(), entry.maxPayloads()));
            assertEquals(op, request.op(), m.toString());
            seen.add(op);
        }
        // the two the golden captures lack
        Request hits = decoder(Op.QUERY_PREFETCH_LOOKUP_HITS).decode(decoder, new byte[][] {pack("req-1")}, 0, 1);
        assertEquals(Op.QUERY_PREFETCH_LOOKUP_HITS, hits.op());
        Request wait = decoder(Op.WAIT_PREFETCH_STATUS).decode(decoder, new byte[][] {pack("req-1")}, 0, 1);
        assertEquals(Op.WAIT_PREFETCH_STATUS, wait.op());
        Request poll = decoder(Op.POLL_KV_EVENTS).decode(decoder, new byte[][] {pack("m"), packInt(0), packInt(1024)}, 0, 3);
        assertEquals(Op.POLL_KV_EVENTS, poll.op());
        OpEntry.Streamed<?> subscribe = assertInstanceOf(OpEntry.Streamed.class, table.entry(Op.SUBSCRIBE_KV_EVENTS));
        Request stream = subscribe.decoder().decode(decoder, new byte[][] {packInt(5), pack("m"), packInt(0), packInt(16)}, 0, 4);
        assertEquals(Op.SUBSCRIBE_KV_EVENTS, stream.op());
        Request pool = decoder(Op.REGISTER_LAYERWISE_IPC_EVENT_POOL).decode(decoder, new byte[][] {packInt(5)}, 0, 1);
        assertEquals(Op.REGISTER_LAYERWISE_IPC_EVENT_POOL, pool.op());
        seen.add(Op.REGISTER_LAYERWISE_IPC_EVENT_POOL);
        seen.add(Op.RETRIEVE_LAYERWISE); // RETRIEVE's payloads: decoded by the same decoder as the golden RETRIEVEs
        seen.add(Op.POLL_KV_EVENTS);
        seen.add(Op.SUBSCRIBE_KV_EVENTS);
        seen.add(Op.QUERY_PREFETCH_LOOKUP_HITS);
        seen.add(Op.WAIT_PREFETCH_STATUS);
        for (Op op : Op.values()) {
            assertTrue(seen.contains(op) || table.entry(op) instanceof OpEntry.Unsupported, op + " decoded at least once");
        }
    }

    @Test
    void randomFramesNeverEscapeAnEntrysDecoderAsAnythingButProtocolException() {
        RequestDecoder decoder = new RequestDecoder();
        Random random = new Random(7);
        for (Op op : Op.values()) {
            if (!(table.entry(op) instanceof OpEntry.Handled<?> entry)) {
                continue;
            }
            for (int i = 0; i < 300; i++) {
                byte[][] frames = new byte[Math.min(random.nextInt(8), entry.maxPayloads())][];
                for (int f = 0; f < frames.length; f++) {
                    frames[f] = new byte[random.nextInt(40)];
                    random.nextBytes(frames[f]);
                }
                try {
                    entry.decoder().decode(decoder, frames, 0, frames.length);
                } catch (ProtocolException expected) {
                    // fine: bad input is reported, never thrown as anything else
                } catch (RuntimeException e) {
                    fail(op + " decoder threw " + e, e);
                }
            }
        }
    }

    @Test
    @SuppressWarnings("unchecked")
    void disabledTransferModesAnswerWithTheFailureValue() throws Exception {
        for (Op op : List.of(Op.REGISTER_KV_CACHE, Op.STORE, Op.RETRIEVE, Op.PREPARE_STORE, Op.COMMIT_STORE, Op.PREPARE_RETRIEVE)) {
            OpEntry.Handled<?> entry = assertInstanceOf(OpEntry.Handled.class, table.entry(op));
            for (int i = 0; i < 2; i++) {
                Reply reply = ((RequestHandler<Request>) entry.handler()).handle(null, null);
                assertEquals(entry.failure().get(), reply, op.wireName());
            }
        }
        assertFalse(table.entry(Op.STORE) instanceof OpEntry.Unsupported, "a disabled mode's ops are answered, not dropped");
    }

    private RequestDecoder.PayloadDecoder<?> decoder(Op op) {
        return ((OpEntry.Handled<?>) table.entry(op)).decoder();
    }

    private static byte[] pack(String value) {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            packer.packString(value);
            return packer.toByteArray();
        } catch (IOException e) {
            throw new AssertionError(e);
        }
    }

    private static byte[] packInt(long value) {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            packer.packLong(value);
            return packer.toByteArray();
        } catch (IOException e) {
            throw new AssertionError(e);
        }
    }
}
