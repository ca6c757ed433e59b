package io.lmcache.server.module;

import static io.lmcache.server.testing.TestClient.pack;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.cuda.GpuBackend;
import io.lmcache.server.loop.Dispatcher;
import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.loop.Inbound;
import io.lmcache.server.loop.ReplyQueue;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.protocol.EventHandle;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.testing.Inbounds;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Isolated IPC on the host-only path (issue 47, item 2): every STORE/RETRIEVE event handle is classified, every request gets
 * a reply (none waits), the reply's event is in the request's format, and malformed handles and kind mismatches are counted.
 * The module answers an unknown instance here, so each reply is a failure reply; the GPU's copies in kind run on the GPU host
 * (testclient/gpu/isolated_ipc_check.py).
 */
class EventKindsTest {
    private static final int CHUNK_SIZE = 256;
    /** {@code 92 c4 40 <64 zero bytes> c2}: the host-only CUDA-event failure. */
    private static final String CUDA_FAILURE_HEX = "92c440" + "00".repeat(64) + "c2";
    /** {@code 92 c4 51 <version 1, 64-byte handle, slot 0, seq 0> c2}: the host-only timeline failure (complete event). */
    private static final String TIMELINE_FAILURE_HEX = "92c451" + "01" + "00".repeat(64) + "00".repeat(16) + "c2";

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

    private static byte[] timeline(int version, long slotOffset, long seq) {
        byte[] handle = new byte[64];
        Arrays.fill(handle, (byte) 0x5a);
        return ByteBuffer.allocate(81).put((byte) version).put(handle).putLong(slotOffset).putLong(seq).array();
    }

    @Test
    void aTimelineRequestIsAnsweredWithATimelinePayloadAndACudaEventRequestWithACudaEvent() {
        Dispatcher dispatcher = dispatcher(false);
        for (Op op : List.of(Op.STORE, Op.RETRIEVE)) {
            assertEquals(TIMELINE_FAILURE_HEX, answer(dispatcher, transfer(op, timeline(1, 8, 1))), op + " timeline");
            assertEquals(CUDA_FAILURE_HEX, answer(dispatcher, transfer(op, new byte[64])), op + " CUDA event");
            assertEquals(CUDA_FAILURE_HEX, answer(dispatcher, transfer(op, new byte[0])), op + " no event");
        }
        assertEquals(0.0, counter("lmcache_mp.malformed_event_handles"));
        assertEquals(2.0, counter("lmcache_mp.event_kind_mismatches"), "two timeline requests to a server without --isolated-ipc");
    }

    @Test
    void malformedHandlesGetAReplyInTheFormatTheirLengthSuggestsAndACounter() {
        Dispatcher dispatcher = dispatcher(true);
        List<byte[]> timelineShaped = List.of(timeline(2, 8, 1), timeline(0, 8, 1), timeline(1, 32768, 1), timeline(1, 12, 1),
                timeline(1, 8, -1));
        for (byte[] bad : timelineShaped) {
            assertEquals(TIMELINE_FAILURE_HEX, answer(dispatcher, transfer(Op.STORE, bad)));
            assertEquals(TIMELINE_FAILURE_HEX, answer(dispatcher, transfer(Op.RETRIEVE, bad)));
        }
        for (int length : new int[] {1, 63, 65, 80}) {
            assertEquals(CUDA_FAILURE_HEX, answer(dispatcher, transfer(Op.STORE, new byte[length])), length + " bytes");
        }
        assertEquals(14.0, counter("lmcache_mp.malformed_event_handles"));
        assertEquals(0.0, counter("lmcache_mp.event_kind_mismatches"), "malformed handles are not mismatches");
    }

    @Test
    void aHandleLongerThanAnyBackendsIsABadRequestStillAnswered() {
        Dispatcher dispatcher = dispatcher(true);
        assertEquals(CUDA_FAILURE_HEX, answer(dispatcher, transfer(Op.STORE, new byte[82])));
    }

    @Test
    void aCudaEventWhileIsolatedIsServedAndCountedAsAMismatch() {
        Dispatcher dispatcher = dispatcher(true);
        byte[] event = new byte[64];
        event[3] = 1;
        assertEquals(CUDA_FAILURE_HEX, answer(dispatcher, transfer(Op.RETRIEVE, event)));
        assertEquals(TIMELINE_FAILURE_HEX, answer(dispatcher, transfer(Op.RETRIEVE, timeline(1, 8, 7))));
        assertEquals(1.0, counter("lmcache_mp.event_kind_mismatches"));
    }

    @Test
    void aTimelineRequestWhoseHandlerThrowsStillGetsATimelineReply() {
        EventKinds kinds = new EventKinds(GpuBackend.none(), FailureReplies.hostOnly(), metrics, true);
        Reply reply = kinds.serve("store", timeline(1, 8, 1), () -> {
            throw new IllegalStateException("handler bug");
        });
        Reply.Transfer transfer = (Reply.Transfer) reply;
        assertEquals(81, transfer.eventHandle().length);
        assertEquals(new EventHandle.Timeline(new byte[64], 0, 0), EventHandle.classify(transfer.eventHandle()));
        assertTrue(!transfer.ok());
    }

    @Test
    void aSuccessfulReplyInKindPassesThroughUnchanged() {
        EventKinds kinds = new EventKinds(GpuBackend.none(), FailureReplies.hostOnly(), metrics, true);
        byte[] recorded = timeline(1, 16, 42);
        Reply.Transfer reply = (Reply.Transfer) kinds.serve("retrieve", timeline(1, 8, 1), () -> new Reply.Transfer(recorded, true));
        assertEquals(HexFormat.of().formatHex(recorded), HexFormat.of().formatHex(reply.eventHandle()));
        assertTrue(reply.ok());
    }

    private Dispatcher dispatcher(boolean isolatedIpc) {
        LmcacheDrivenTransferModule module = TransferFailureEventsTest.liveModule(metrics);
        ManagementModule management = new ManagementModule(CHUNK_SIZE, null, List.of(), null, Map.of());
        LookupModule lookup = new LookupModule(CHUNK_SIZE, null, null, null, null, null);
        Dispatcher dispatcher = new Dispatcher(ServerOps.table(management, lookup, ServerOpsTest.kvEvents(), Optional.of(module), Optional.empty(),
                new EventKinds(GpuBackend.none(), FailureReplies.hostOnly(), metrics, isolatedIpc)), replies, metrics, 1, 1, 0);
        dispatchers.add(dispatcher);
        return dispatcher;
    }

    private String answer(Dispatcher dispatcher, Inbound in) {
        return TransferFailureEventsTest.answer(replies, dispatcher, in);
    }

    private double counter(String name) {
        return metrics.registry().find(name).counters().stream().mapToDouble(c -> c.count()).sum()
                + metrics.registry().find(name).functionCounters().stream().mapToDouble(c -> c.count()).sum();
    }

    /** A STORE or RETRIEVE of one chunk for the unregistered instance 12345, carrying {@code event}. */
    private Inbound transfer(Op op, byte[] event) {
        byte[] key = pack(p -> {
            p.packMapHeader(8);
            p.packString("model_name").packString("test-model");
            p.packString("world_size").packInt(1);
            p.packString("worker_id").packInt(0);
            p.packString("token_ids").packArrayHeader(CHUNK_SIZE);
            for (int i = 0; i < CHUNK_SIZE; i++) {
                p.packInt(100_000 + i);
            }
            p.packString("start").packInt(0);
            p.packString("end").packInt(CHUNK_SIZE);
            p.packString("request_id").packString("req-1");
            p.packString("cache_salt").packString("");
        });
        byte[] instance = pack(p -> p.packLong(12345));
        byte[] blocks = pack(p -> p.packArrayHeader(1).packArrayHeader(1).packInt(0));
        byte[] handle = pack(p -> p.packBinaryHeader(event.length).writePayload(event));
        return op == Op.STORE ? Inbounds.of(op, nextUid++, key, instance, blocks, handle)
                : Inbounds.of(op, nextUid++, key, instance, blocks, handle, pack(p -> p.packInt(0)));
    }
}
