package io.lmcache.server.module;

import static io.lmcache.server.testing.TestClient.pack;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.cuda.GpuBackend;
import io.lmcache.server.liveness.Liveness;
import io.lmcache.server.loop.Dispatcher;
import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.loop.HandlerKind;
import io.lmcache.server.loop.Inbound;
import io.lmcache.server.loop.OpTable;
import io.lmcache.server.loop.Outbound;
import io.lmcache.server.loop.ReplyQueue;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.peer.PeerConnections;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.RequestDecoder;
import io.lmcache.server.testing.Inbounds;
import io.lmcache.server.transfer.CopyPaths;
import io.lmcache.server.transfer.ObjectGroupCatalog;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 13, item 5: every path that answers a STORE or RETRIEVE without a handler's reply carries
 * the GPU backend's failure event (a complete event a GPU worker can open), never 64 zero bytes.
 * The backend here is a fake event source with a recognisable handle; the real one runs on the
 * H200 host (testclient/gpu/gpu_check.py test).
 */
class TransferFailureEventsTest {
    private static final int CHUNK_SIZE = 256;
    private static final List<Op> TRANSFERS = List.of(Op.STORE, Op.RETRIEVE);
    /** The fake backend's handle: not zero, so a reply carrying it came from the backend. */
    private static final byte[] BACKEND_EVENT = filled((byte) 0xEE);
    private static final String BACKEND_FAILURE_HEX = "92c440" + HexFormat.of().formatHex(BACKEND_EVENT) + "c2";
    private static final String ZERO_FAILURE_HEX = "92c440" + "00".repeat(64) + "c2";

    /** The device UUIDs the fake backend was asked for (null: the request's GPU was not known). */
    private final List<String> asked = new ArrayList<>();
    private final FailureReplies failures = FailureReplies.withEvents(uuid -> {
        // runs on: the dispatching thread (test thread, lmcache-transfer-*)
        synchronized (asked) {
            asked.add(uuid);
        }
        return BACKEND_EVENT.clone();
    });
    private final ReplyQueue replies = new ReplyQueue();
    private final ServerMetrics metrics = new ServerMetrics();
    private final List<Dispatcher> dispatchers = new ArrayList<>();
    private int nextUid;

    @AfterEach
    void close() throws InterruptedException {
        for (Dispatcher dispatcher : dispatchers) {
            dispatcher.close();
        }
    }

    @Test
    void anUndecodableStoreOrRetrieveGetsTheBackendsEvent() {
        Dispatcher dispatcher = dispatcher(serverTable(liveModule()));
        for (Op op : TRANSFERS) {
            // a token id of 2^32 (msgpack uint64), as the H200 run had, and a payload that is no msgpack at all
            assertEquals(BACKEND_FAILURE_HEX, answer(dispatcher, transfer(op, 1L << 32)), op + " with a token id >= 2^32");
            assertEquals(BACKEND_FAILURE_HEX, answer(dispatcher, inbound(op, new byte[] {(byte) 0xc1}, new byte[0])),
                    op + " with a garbage key");
        }
        assertEquals(4.0, badRequests(), "each counted as a bad request");
        assertTrue(asked.stream().allMatch(uuid -> uuid == null), "the device is not known before decoding: the first GPU's");
    }

    @Test
    void theLiveModuleStillAnswersAnUnknownInstanceItself() {
        // contrast: a decodable STORE reaches the module, whose answer (host-only backend here) is not the dispatcher's
        Dispatcher dispatcher = dispatcher(serverTable(liveModule()));
        assertEquals(ZERO_FAILURE_HEX, answer(dispatcher, transfer(Op.STORE, 7)));
        assertTrue(asked.isEmpty(), "the dispatcher's failure value was not used");
    }

    @Test
    void aHandlerExceptionIsAnsweredWithTheBackendsEvent() {
        OpTable.Builder b = OpTable.builder()
                .op(Op.STORE, HandlerKind.AFFINITY, RequestDecoder::store, (r, peer) -> {
                    throw new IllegalStateException("handler bug");
                }, failures::transferFailure)
                .op(Op.RETRIEVE, HandlerKind.AFFINITY, RequestDecoder::retrieve, (r, peer) -> {
                    throw new IllegalStateException("handler bug");
                }, failures::transferFailure);
        b.unsupported("not under test", EnumSet.complementOf(EnumSet.copyOf(TRANSFERS)).toArray(Op[]::new));
        Dispatcher dispatcher = dispatcher(b.build());
        for (Op op : TRANSFERS) {
            assertEquals(BACKEND_FAILURE_HEX, answer(dispatcher, transfer(op, 7)), op.wireName());
        }
    }

    @Test
    void aRequestRejectedDuringShutdownIsAnsweredWithTheBackendsEvent() throws InterruptedException {
        Dispatcher dispatcher = dispatcher(serverTable(liveModule()));
        dispatcher.close();
        for (Op op : TRANSFERS) {
            dispatcher.dispatch(transfer(op, 7));
            Outbound reply = replies.poll();
            assertNotNull(reply, op + ": answered on the dispatching thread, the pools being shut down");
            assertEquals(BACKEND_FAILURE_HEX, HexFormat.of().formatHex(reply.payload()), op.wireName());
        }
        assertEquals(0, dispatcher.inflight());
    }

    @Test
    void aDisabledLmcacheDrivenModeAnswersWithTheBackendsEvent() {
        // --supported-transfer-mode engine_driven
        Dispatcher dispatcher = dispatcher(serverTable(null));
        for (Op op : TRANSFERS) {
            for (int i = 0; i < 2; i++) {
                assertEquals(BACKEND_FAILURE_HEX, answer(dispatcher, transfer(op, 7)), op.wireName() + " #" + i);
            }
        }
        assertEquals(4, asked.size());
    }

    @Test
    void aBackendThatCannotMakeTheEventFallsBackToZeroBytesWithoutThrowing() {
        FailureReplies broken = FailureReplies.withEvents(uuid -> {
            throw new IllegalStateException("CUDA_ERROR_OUT_OF_MEMORY");
        });
        assertSame(FailureReplies.TRANSFER_FAILED, broken.transferFailure());
        assertSame(FailureReplies.TRANSFER_FAILED, FailureReplies.withEvents(uuid -> new byte[3]).transferFailure());
        assertSame(FailureReplies.TRANSFER_FAILED, FailureReplies.hostOnly().transferFailure());
    }

    private OpTable serverTable(LmcacheDrivenTransferModule lmcacheDriven) {
        ManagementModule management = new ManagementModule(CHUNK_SIZE, null, List.of(), null, Map.of());
        LookupModule lookup = new LookupModule(CHUNK_SIZE, null, null, null, null, null);
        return ServerOps.table(management, lookup, ServerOpsTest.kvEvents(), Optional.ofNullable(lmcacheDriven), Optional.empty(),
                new EventKinds(GpuBackend.none(), failures, new ServerMetrics(), false));
    }

    private LmcacheDrivenTransferModule liveModule() {
        return liveModule(metrics);
    }

    /** The module without a pool or store: it only ever answers here that the instance is unknown (also EventKindsTest's). */
    static LmcacheDrivenTransferModule liveModule(ServerMetrics metrics) {
        PeerConnections connections = new PeerConnections(System::nanoTime, TimeUnit.MINUTES.toNanos(1));
        Liveness liveness = new Liveness(System::nanoTime, connections, TimeUnit.MINUTES.toNanos(1));
        return new LmcacheDrivenTransferModule(CHUNK_SIZE, null, null, metrics, liveness, new CopyPaths(null, null, null, null, null),
                new ObjectGroupCatalog(true));
    }

    private Dispatcher dispatcher(OpTable table) {
        Dispatcher dispatcher = new Dispatcher(table, replies, metrics, 1, 1, 0);
        dispatchers.add(dispatcher);
        return dispatcher;
    }

    private String answer(Dispatcher dispatcher, Inbound in) {
        return answer(replies, dispatcher, in);
    }

    /** Dispatches one request and waits (bounded: a request left unanswered fails here) for its reply on {@code replies}; the payload in hex. */
    static String answer(ReplyQueue replies, Dispatcher dispatcher, Inbound in) {
        dispatcher.dispatch(in);
        Outbound[] reply = new Outbound[1];
        await().atMost(Duration.ofSeconds(5)).until(() -> (reply[0] = replies.poll()) != null);
        assertTrue(Arrays.equals(in.uid(), reply[0].uid()), "the reply to this request");
        return HexFormat.of().formatHex(reply[0].payload());
    }

    private double badRequests() {
        return metrics.registry().find("lmcache_mp.bad_requests").counters().stream().mapToDouble(c -> c.count()).sum()
                + metrics.registry().find("lmcache_mp.bad_requests").functionCounters().stream().mapToDouble(c -> c.count()).sum();
    }

    /** A STORE or RETRIEVE of one chunk for instance 12345 whose first token id is {@code firstToken}. */
    private Inbound transfer(Op op, long firstToken) {
        byte[] key = pack(p -> {
            p.packMapHeader(9);
            p.packString("model_name").packString("test-model");
            p.packString("world_size").packInt(1);
            p.packString("worker_id").packInt(0);
            p.packString("token_ids").packArrayHeader(CHUNK_SIZE);
            p.packLong(firstToken); // 2^32 and up: msgpack uint64
            for (int i = 1; i < CHUNK_SIZE; i++) {
                p.packInt(100_000 + i);
            }
            p.packString("start").packInt(0);
            p.packString("end").packInt(CHUNK_SIZE);
            p.packString("request_id").packString("req-1");
            p.packString("cache_salt").packString("");
            p.packString("num_kv_readers").packInt(1);
        });
        byte[] instance = pack(p -> p.packLong(12345));
        byte[] blocks = pack(p -> p.packArrayHeader(1).packArrayHeader(1).packInt(0));
        byte[] event = pack(p -> p.packBinaryHeader(64).writePayload(new byte[64]));
        return op == Op.STORE ? inbound(op, key, instance, blocks, event) : inbound(op, key, instance, blocks, event, pack(p -> p.packInt(0)));
    }

    private static byte[] filled(byte value) {
        byte[] bytes = new byte[64];
        Arrays.fill(bytes, value);
        return bytes;
    }

    private Inbound inbound(Op op, byte[]... payloads) {
        return Inbounds.of(op, nextUid++, payloads);
    }
}
