package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.protocol.TokenHashChain;
import io.lmcache.server.testing.EngineDrivenWorker;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.RawZmtpPeer;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.msgpack.core.MessagePack;
import org.msgpack.value.Value;

/**
 * The KV-event channel against the real server, with a client framed as LMCache's (kv-events.md): a CPU worker STOREs, then
 * {@code poll_kv_events} and the {@code subscribe_kv_events} stream see its records in order with the right hashes, parents and
 * tokens; credits, cancel and a vanished subscriber; a restart; a log of 8 under 20 stores; STORAGE records with an fs_native L2.
 */
@ExtendWith(ServerLogOnFailure.class)
class KvEventsIT {
    private static final int CHUNK = 256;
    private static final int BLOCKS_PER_CHUNK = CHUNK / 16;
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(2, 8 * BLOCKS_PER_CHUNK, 16, 2, 64);
    private static final String MODEL = "events/model";
    private static final byte[] EMPTY = new byte[0];

    record Rec(long seq, String kind, String medium, String model, List<byte[]> hashes, byte[] parent, int[] tokens) {}

    record Batch(boolean enabled, long incarnation, long nextCursor, boolean lost, List<Rec> events) {}

    private static ServerProcess server(String... flags) {
        List<String> args = new ArrayList<>(List.of("--l1-size-gb", "0.25"));
        args.addAll(List.of(flags));
        return ServerProcess.start(Map.of(), args.toArray(String[]::new));
    }

    @Test
    void pollSeesEveryStoredChunkInOrderWithItsHashParentAndTokensAndClearRemovesThem() {
        try (ServerProcess server = server();
             JavaWorker worker = new JavaWorker(server.endpoint(), 41, MODEL, GEOMETRY);
             TestClient router = new TestClient(server.endpoint())) {
            assertEquals(List.of("kv_event_stream", "kv_events"), strings(router.call(32).payload()), "both capabilities advertised");
            worker.register();
            int[] blocks = JavaWorker.range(0, 4 * BLOCKS_PER_CHUNK);
            worker.fill(blocks, 3);
            int[] tokens = JavaWorker.tokens(77, 4 * CHUNK);
            assertTrue(worker.store(tokens, 0, 2 * CHUNK, JavaWorker.range(0, 2 * BLOCKS_PER_CHUNK), "head"));
            assertTrue(worker.store(tokens, 2 * CHUNK, 4 * CHUNK, JavaWorker.range(2 * BLOCKS_PER_CHUNK, 2 * BLOCKS_PER_CHUNK), "tail"));
            assertTrue(worker.store(tokens, 0, 2 * CHUNK, JavaWorker.range(0, 2 * BLOCKS_PER_CHUNK), "again"), "a duplicate STORE");
            Batch batch = pollById(router, MODEL, 0, 1024);
            assertTrue(batch.enabled());
            assertFalse(batch.lost());
            assertEquals(4, batch.events().size(), "one record per written chunk; the duplicate STORE wrote nothing");
            byte[][] expected = hashes(tokens, 4);
            for (int c = 0; c < 4; c++) {
                Rec rec = batch.events().get(c);
                assertEquals(c + 1, rec.seq());
                assertEquals("stored", rec.kind());
                assertEquals("CPU", rec.medium());
                assertEquals(MODEL, rec.model());
                assertArrayEquals(expected[c], rec.hashes().getFirst(), "chunk " + c + "'s hash");
                if (c == 0) {
                    assertNull(rec.parent(), "the first chunk has no parent");
                } else {
                    assertArrayEquals(expected[c - 1], rec.parent(), "chunk " + c + "'s parent is the chunk before it");
                }
                int[] chunkTokens = new int[CHUNK];
                System.arraycopy(tokens, c * CHUNK, chunkTokens, 0, CHUNK);
                assertArrayEquals(chunkTokens, rec.tokens());
            }
            assertEquals(4, batch.nextCursor());
            Batch byName = poll(router, TestClient.pack(p -> p.packString("poll_kv_events")), MODEL, 2, 1);
            assertEquals(List.of(3L), byName.events().stream().map(Rec::seq).toList(), "the string op name, max_events 1");
            assertEquals(0, pollById(router, "other/model", 0, 1024).events().size(), "another model's reader sees none");
            router.call(20, TestClient.pack(p -> p.packBoolean(false)));
            Batch removed = pollById(router, MODEL, 4, 1024);
            List<ByteBuffer> named = new ArrayList<>();
            for (Rec rec : removed.events()) {
                assertEquals("removed", rec.kind());
                assertEquals("CPU", rec.medium());
                assertNull(rec.parent());
                assertEquals(0, rec.tokens().length);
                rec.hashes().forEach(h -> named.add(ByteBuffer.wrap(h)));
            }
            assertEquals(4, named.size(), "CLEAR removes each stored chunk once");
            for (byte[] hash : expected) {
                assertTrue(named.contains(ByteBuffer.wrap(hash)), "CLEAR names every stored hash");
            }
            JsonNode status = status(server).path("kv_events");
            assertTrue(status.path("enabled").asBoolean());
            assertEquals(32768, status.path("log_capacity").asInt());
            assertEquals(batch.incarnation(), status.path("incarnation").asLong());
            assertEquals(4, Http.metric(server, "lmcache_mp_kv_events_records_total", "kind", "stored"));
        }
    }

    @Test
    void theStreamSendsItsFirstBatchAtOnceThenOneBatchPerAckAndEndsOnCancel() {
        try (ServerProcess server = server();
             JavaWorker worker = new JavaWorker(server.endpoint(), 42, MODEL, GEOMETRY);
             TestClient subscriber = new TestClient(server.endpoint())) {
            worker.register();
            worker.fill(JavaWorker.range(0, 2 * BLOCKS_PER_CHUNK), 5);
            int[] tokens = JavaWorker.tokens(78, 2 * CHUNK);
            byte[] uid = TestClient.pack(p -> p.packString("sub-1"));
            subscribe(subscriber, uid, 42, 0);
            TestClient.Reply first = subscriber.receive(Duration.ofSeconds(10));
            assertNotNull(first, "the first batch comes without credit");
            assertArrayEquals(uid, first.uid());
            assertEquals(0, decode(first.payload()).events().size(), "an initial status batch: nothing stored yet");
            assertTrue(worker.store(tokens, 0, CHUNK, JavaWorker.range(0, BLOCKS_PER_CHUNK), "s1"));
            assertNull(subscriber.receive(Duration.ofMillis(700)), "no batch without a credit");
            subscriber.sendRaw(uid, EMPTY, "ack".getBytes(StandardCharsets.US_ASCII));
            Batch second = decode(subscriber.receive(Duration.ofSeconds(10)).payload());
            assertEquals(List.of(1L), second.events().stream().map(Rec::seq).toList());
            subscriber.sendRaw(uid, EMPTY, "ack".getBytes(StandardCharsets.US_ASCII));
            assertTrue(worker.store(tokens, CHUNK, 2 * CHUNK, JavaWorker.range(BLOCKS_PER_CHUNK, BLOCKS_PER_CHUNK), "s2"));
            Batch third = decode(subscriber.receive(Duration.ofSeconds(10)).payload());
            assertEquals(List.of(2L), third.events().stream().map(Rec::seq).toList(), "a waiting subscriber with credit is woken");
            subscriber.sendRaw(uid, EMPTY, "cancel".getBytes(StandardCharsets.US_ASCII));
            TestClient.Reply last = subscriber.receive(Duration.ofSeconds(10));
            assertNotNull(last);
            assertEquals(2, last.frames(), "the final reply: uid and op, no payload");
            assertEquals(1, Http.metric(server, "lmcache_mp_kv_events_subscriptions_ended_total", "reason", "cancelled"));
            assertEquals(0, Http.metric(server, "lmcache_mp_unknown_ops_total") + Http.metric(server, "lmcache_mp_bad_requests_total"),
                    "control frames are neither unknown ops nor bad requests");
        }
    }

    @Test
    void onlyItsOwnConnectionReplacesAStreamAndAClosedConnectionsStreamsEnd() {
        try (ServerProcess server = server();
             JavaWorker worker = new JavaWorker(server.endpoint(), 43, MODEL, GEOMETRY)) {
            worker.register();
            worker.fill(JavaWorker.range(0, BLOCKS_PER_CHUNK), 6);
            byte[] uid = TestClient.pack(p -> p.packInt(9));
            TestClient owner = new TestClient(server.endpoint());
            subscribe(owner, uid, 43, 0);
            assertNotNull(owner.receive(Duration.ofSeconds(10)));
            try (TestClient intruder = new TestClient(server.endpoint())) {
                subscribe(intruder, uid, 43, 0);
                TestClient.Reply refused = intruder.receive(Duration.ofSeconds(10));
                assertEquals(2, refused.frames(), "another peer naming the instance gets a final reply at once");
            }
            assertEquals(1, Http.metric(server, "lmcache_mp_kv_events_subscriptions_ended_total", "reason", "refused"));
            assertEquals(0, Http.metric(server, "lmcache_mp_kv_events_subscriptions_ended_total", "reason", "replaced"));
            assertEquals(1, Http.metric(server, "lmcache_mp_kv_events_subscribers"), "the owner's stream goes on");
            byte[] second = TestClient.pack(p -> p.packInt(10));
            subscribe(owner, second, 43, 0);
            TestClient.Reply ended = owner.receive(Duration.ofSeconds(10));
            assertArrayEquals(uid, ended.uid());
            assertEquals(2, ended.frames(), "its own connection replaces it: the old stream gets its final reply");
            assertNotNull(owner.receive(Duration.ofSeconds(10)), "the new stream's first batch");
            assertEquals(1, Http.metric(server, "lmcache_mp_kv_events_subscriptions_ended_total", "reason", "replaced"));
            owner.close();
            await().atMost(Duration.ofSeconds(20)).until(
                    () -> Http.metric(server, "lmcache_mp_kv_events_subscriptions_ended_total", "reason", "connection_closed") == 1);
            assertEquals(0, Http.metric(server, "lmcache_mp_kv_events_subscribers"));
        }
    }

    @Test
    void aSaltedStoresRecordsCarryItsHashesButNoTokensToAnyReader() {
        try (ServerProcess server = server();
             JavaWorker worker = new JavaWorker(server.endpoint(), 50, MODEL, GEOMETRY);
             TestClient router = new TestClient(server.endpoint())) {
            worker.register();
            worker.fill(JavaWorker.range(0, 2 * BLOCKS_PER_CHUNK), 10);
            int[] tokens = JavaWorker.tokens(83, 2 * CHUNK);
            assertTrue(worker.store(tokens, 0, CHUNK, JavaWorker.range(0, BLOCKS_PER_CHUNK), "plain"));
            worker.salt("tenant-a");
            assertTrue(worker.store(tokens, 0, CHUNK, JavaWorker.range(BLOCKS_PER_CHUNK, BLOCKS_PER_CHUNK), "salted"));
            Batch batch = pollById(router, MODEL, 0, 1024);
            assertEquals(2, batch.events().size());
            assertEquals(CHUNK, batch.events().get(0).tokens().length, "the unsalted chunk with its tokens");
            Rec salted = batch.events().get(1);
            assertEquals("stored", salted.kind());
            assertEquals(0, salted.tokens().length, "the salted chunk: no token ids");
            assertEquals(1, salted.hashes().size(), "but its hash");
            byte[] uid = TestClient.pack(p -> p.packInt(11));
            subscribe(router, uid, 50, 0);
            Batch first = decode(router.receive(Duration.ofSeconds(10)).payload());
            assertEquals(0, first.events().get(1).tokens().length, "nor to a subscriber");
        }
    }

    /**
     * Issue 45, N2: a peer that polls whole pages and never reads its replies. Each reply is a page (at most 1 024 records,
     * even for max_events 2^31-1); past its share of unread reply bytes the peer's replies are dropped, counted, and its
     * connection closed, while a reader's polls go on.
     */
    @Test
    void aPeerThatNeverReadsItsPagesIsDroppedCountedAndDisconnected() throws Exception {
        try (ServerProcess server = server();
             JavaWorker worker = new JavaWorker(server.endpoint(), 51, MODEL, GEOMETRY);
             TestClient router = new TestClient(server.endpoint())) {
            worker.register();
            worker.fill(JavaWorker.range(0, 8 * BLOCKS_PER_CHUNK), 11);
            for (int i = 0; i < 160; i++) {
                assertTrue(worker.store(JavaWorker.tokens(1000 + i, 8 * CHUNK), 0, 8 * CHUNK, JavaWorker.range(0, 8 * BLOCKS_PER_CHUNK), "p" + i));
            }
            Batch page = pollById(router, MODEL, 0, Integer.MAX_VALUE);
            assertEquals(1024, page.events().size(), "max_events 2^31-1 reads one page");
            RawZmtpPeer idle = RawZmtpPeer.connect(server.port(), 4096);
            try {
                byte[] poll = RawZmtpPeer.message(TestClient.pack(p -> p.packInt(1)), TestClient.pack(p -> p.packInt(34)),
                        TestClient.pack(p -> p.packString(MODEL)), TestClient.pack(p -> p.packLong(0)),
                        TestClient.pack(p -> p.packInt(Integer.MAX_VALUE)));
                for (int i = 0; i < 60; i++) {
                    idle.write(poll);
                }
                await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200))
                        .until(() -> Http.metric(server, "lmcache_mp_peers_disconnected_total") >= 1);
                assertTrue(Http.metric(server, "lmcache_mp_replies_dropped_total", "reason", "peer_over_share") >= 1);
                assertTrue(idle.closedByServer(Duration.ofSeconds(10)), "the peer that does not read is disconnected");
            } finally {
                idle.close();
            }
            assertEquals(1024, pollById(router, MODEL, 0, 1024).events().size(), "a reader is still served");
        }
    }

    @Test
    void aLogOfEightUnderTwentyStoresReportsTheLossAndStaysBounded() {
        try (ServerProcess server = server("--kv-event-log-size", "8");
             JavaWorker worker = new JavaWorker(server.endpoint(), 44, MODEL, GEOMETRY);
             TestClient router = new TestClient(server.endpoint())) {
            worker.register();
            worker.fill(JavaWorker.range(0, BLOCKS_PER_CHUNK), 7);
            for (int i = 0; i < 20; i++) {
                assertTrue(worker.store(JavaWorker.tokens(100 + i, CHUNK), 0, CHUNK, JavaWorker.range(0, BLOCKS_PER_CHUNK), "b" + i));
            }
            Batch fromStart = pollById(router, MODEL, 0, 1024);
            assertTrue(fromStart.lost(), "records 1..12 were trimmed");
            assertEquals(List.of(13L, 14L, 15L, 16L, 17L, 18L, 19L, 20L), fromStart.events().stream().map(Rec::seq).toList());
            assertEquals(20, fromStart.nextCursor());
            assertFalse(pollById(router, MODEL, 12, 1024).lost(), "a reader at 12 missed nothing");
            Batch future = pollById(router, MODEL, 99, 1024);
            assertTrue(future.lost());
            assertEquals(20, future.nextCursor());
            JsonNode status = status(server).path("kv_events");
            assertEquals(8, status.path("log_depth").asInt(), "the log keeps 8 records");
            assertEquals(21, status.path("next_seq").asInt());
        }
    }

    @Test
    void aRestartIsANewIncarnationAndAnOldCursorReadsAsLost() {
        long incarnation;
        long cursor;
        try (ServerProcess server = server();
             JavaWorker worker = new JavaWorker(server.endpoint(), 45, MODEL, GEOMETRY);
             TestClient router = new TestClient(server.endpoint())) {
            worker.register();
            worker.fill(JavaWorker.range(0, BLOCKS_PER_CHUNK), 8);
            assertTrue(worker.store(JavaWorker.tokens(80, CHUNK), 0, CHUNK, JavaWorker.range(0, BLOCKS_PER_CHUNK), "r"));
            Batch before = pollById(router, MODEL, 0, 1024);
            incarnation = before.incarnation();
            cursor = before.nextCursor();
            assertEquals(1, cursor);
        }
        try (ServerProcess server = server(); TestClient router = new TestClient(server.endpoint())) {
            Batch after = pollById(router, MODEL, cursor, 1024);
            assertNotEquals(incarnation, after.incarnation(), "a new process, a new incarnation");
            assertTrue(after.lost(), "a cursor the new log never issued");
            assertEquals(0, after.nextCursor());
        }
    }

    @Test
    void withTheLogOffNothingIsAdvertisedAndPollsSayDisabled() {
        try (ServerProcess server = server("--kv-event-log-size", "0"); TestClient router = new TestClient(server.endpoint())) {
            assertEquals(List.of(), strings(router.call(32).payload()));
            Batch batch = pollById(router, MODEL, 0, 1024);
            assertFalse(batch.enabled());
            assertEquals(0, batch.nextCursor());
            byte[] uid = TestClient.pack(p -> p.packInt(1));
            subscribe(router, uid, 46, 0);
            assertFalse(decode(router.receive(Duration.ofSeconds(10)).payload()).enabled(), "the first batch says the channel is off");
            router.sendRaw(uid, EMPTY, "ack".getBytes(StandardCharsets.US_ASCII));
            assertEquals(2, router.receive(Duration.ofSeconds(10)).frames(), "and the next read ends the stream");
        }
    }

    @Test
    void anFsNativeL2AddsStorageRecordsWithTheChunksTokens(@TempDir Path dir) {
        String fsNative = "{\"type\":\"fs_native\",\"base_path\":\"" + dir + "\"}";
        try (ServerProcess server = server("--l2-adapter", fsNative);
             JavaWorker worker = new JavaWorker(server.endpoint(), 47, MODEL, GEOMETRY);
             TestClient router = new TestClient(server.endpoint())) {
            worker.register();
            worker.fill(JavaWorker.range(0, 2 * BLOCKS_PER_CHUNK), 9);
            int[] tokens = JavaWorker.tokens(81, 2 * CHUNK);
            assertTrue(worker.store(tokens, 0, 2 * CHUNK, JavaWorker.range(0, 2 * BLOCKS_PER_CHUNK), "l2"));
            byte[][] expected = hashes(tokens, 2);
            List<Rec> storage = new ArrayList<>();
            await().atMost(Duration.ofSeconds(20)).until(() -> {
                storage.clear();
                pollById(router, MODEL, 0, 1024).events().stream().filter(r -> r.medium().equals("STORAGE")).forEach(storage::add);
                return storage.size() == 2;
            });
            storage.sort((a, b) -> Boolean.compare(a.parent() != null, b.parent() != null));
            assertArrayEquals(expected[0], storage.get(0).hashes().getFirst());
            assertNull(storage.get(0).parent());
            assertArrayEquals(expected[1], storage.get(1).hashes().getFirst());
            assertArrayEquals(expected[0], storage.get(1).parent());
            assertEquals(tokens[CHUNK], storage.get(1).tokens()[0]);
        }
    }

    @Test
    void aSilentSubscriberEndsAtTheReapTimeoutAndAReapedWorkersSubscriptionEndsWithIt() {
        try (ServerProcess server = server("--test-liveness-floor-seconds", "1", "--worker-reap-timeout-seconds", "2",
                "--worker-registration-grace-seconds", "2", "--worker-disconnect-grace-seconds", "0");
             JavaWorker worker = new JavaWorker(server.endpoint(), 48, MODEL, GEOMETRY);
             TestClient silent = new TestClient(server.endpoint());
             TestClient router = new TestClient(server.endpoint())) {
            worker.register();
            assertTrue(worker.ping());
            byte[] silentUid = TestClient.pack(p -> p.packInt(1));
            subscribe(silent, silentUid, 4801, 0); // an instance that never registers nor PINGs
            byte[] workerUid = TestClient.pack(p -> p.packInt(2));
            subscribe(router, workerUid, 48, 0); // the worker's, kept alive only by its PINGs, which stop now
            assertNotNull(silent.receive(Duration.ofSeconds(10)), "the first batch");
            assertNotNull(router.receive(Duration.ofSeconds(10)));
            assertEquals(2, silent.receive(Duration.ofSeconds(15)).frames(), "the silent subscription gets its final reply");
            assertEquals(2, router.receive(Duration.ofSeconds(15)).frames(), "so does the one of the worker that went silent");
            await().atMost(Duration.ofSeconds(15)).until(() -> Http.metric(server, "lmcache_mp_reaped_workers_total") == 1);
            double silentEnds = Http.metric(server, "lmcache_mp_kv_events_subscriptions_ended_total", "reason", "silent");
            double reapedEnds = Http.metric(server, "lmcache_mp_kv_events_subscriptions_ended_total", "reason", "reaped");
            assertTrue(silentEnds >= 1, "the never-seen instance's subscription ended as silent");
            assertEquals(2, silentEnds + reapedEnds, "the worker's ended as silent or with its reap, whichever came first");
            assertEquals(0, Http.metric(server, "lmcache_mp_kv_events_subscribers"));
            assertEquals(0, status(server).path("kv_events").path("subscribers").asInt());
        }
    }

    @Test
    void engineDrivenCommitStoresAreCountedUnboundNotAnnouncedButTheirRemovalsAre() {
        try (ServerProcess server = server();
             EngineDrivenWorker worker = new EngineDrivenWorker(server.endpoint(), 49, MODEL, 4, 128);
             TestClient router = new TestClient(server.endpoint())) {
            worker.register();
            int[] tokens = JavaWorker.tokens(82, 2 * CHUNK);
            EngineDrivenWorker.Prepared prepared = worker.prepareStore(tokens, 0, 2 * CHUNK, "ed");
            for (EngineDrivenWorker.Slot slot : prepared.slots()) {
                worker.write(slot, new byte[(int) slot.length()]);
            }
            assertTrue(worker.commitStore(tokens, 0, 2 * CHUNK, "ed"));
            Batch stored = pollById(router, MODEL, 0, 1024);
            assertEquals(List.of(), stored.events(), "LMCache's engine-driven commit_store binds no tokens: nothing is announced");
            assertEquals(2, status(server).path("kv_events").path("unbound_stores").asInt(), "its two chunks are counted unbound");
            router.call(20, TestClient.pack(p -> p.packBoolean(false)));
            List<Rec> removed = pollById(router, MODEL, stored.nextCursor(), 1024).events();
            assertEquals(1, removed.size());
            assertEquals("removed", removed.getFirst().kind());
            assertEquals("CPU", removed.getFirst().medium());
            byte[][] expected = hashes(tokens, 2);
            assertEquals(2, removed.getFirst().hashes().size(), "a removal names every chunk L1 held");
            for (byte[] hash : expected) {
                assertTrue(removed.getFirst().hashes().stream().anyMatch(h -> Arrays.equals(h, hash)));
            }
        }
    }

    // --- the client's half ---------------------------------------------------------------------

    private static void subscribe(TestClient client, byte[] uid, long instanceId, long cursor) {
        client.sendRaw(uid, TestClient.pack(p -> p.packString("subscribe_kv_events")), TestClient.pack(p -> p.packLong(instanceId)),
                TestClient.pack(p -> p.packString(MODEL)), TestClient.pack(p -> p.packLong(cursor)), TestClient.pack(p -> p.packInt(16)));
    }

    private static Batch pollById(TestClient client, String model, long cursor, int max) {
        return poll(client, TestClient.pack(p -> p.packInt(34)), model, cursor, max);
    }

    private static Batch poll(TestClient client, byte[] op, String model, long cursor, int max) {
        byte[] uid = TestClient.pack(p -> p.packString("poll-" + System.nanoTime()));
        client.sendRaw(uid, op, TestClient.pack(p -> p.packString(model)), TestClient.pack(p -> p.packLong(cursor)),
                TestClient.pack(p -> p.packInt(max)));
        TestClient.Reply reply = client.receive(Duration.ofSeconds(10));
        assertNotNull(reply, "poll_kv_events is answered");
        assertArrayEquals(uid, reply.uid());
        return decode(reply.payload());
    }

    /** {@code KVEventPollResult} / {@code KVEventBatch}, decoded by field name as msgspec does. */
    private static Batch decode(byte[] payload) {
        assertNotNull(payload, "a batch has a payload");
        Map<Value, Value> map = value(payload).asMapValue().map();
        List<Rec> events = new ArrayList<>();
        for (Value event : field(map, "events").asArrayValue()) {
            Map<Value, Value> r = event.asMapValue().map();
            List<byte[]> hashes = new ArrayList<>();
            field(r, "block_hashes").asArrayValue().forEach(h -> hashes.add(h.asBinaryValue().asByteArray()));
            Value parent = field(r, "parent_block_hash");
            List<Value> tokenValues = field(r, "token_ids").asArrayValue().list();
            int[] tokens = tokenValues.stream().mapToInt(v -> v.asIntegerValue().toInt()).toArray();
            events.add(new Rec(field(r, "seq").asIntegerValue().toLong(), field(r, "kind").asStringValue().asString(),
                    field(r, "medium").asStringValue().asString(), field(r, "model_name").asStringValue().asString(), hashes,
                    parent.isNilValue() ? null : parent.asBinaryValue().asByteArray(), tokens));
        }
        return new Batch(field(map, "enabled").asBooleanValue().getBoolean(), field(map, "incarnation").asIntegerValue().toLong(),
                field(map, "next_cursor").asIntegerValue().toLong(), field(map, "lost").asBooleanValue().getBoolean(), events);
    }

    private static Value field(Map<Value, Value> map, String name) {
        for (Map.Entry<Value, Value> entry : map.entrySet()) {
            if (entry.getKey().isStringValue() && entry.getKey().asStringValue().asString().equals(name)) {
                return entry.getValue();
            }
        }
        throw new AssertionError("no field " + name + " in " + map.keySet());
    }

    private static List<String> strings(byte[] payload) {
        return value(payload).asArrayValue().list().stream().map(v -> v.asStringValue().asString()).toList();
    }

    private static Value value(byte[] payload) {
        try {
            return MessagePack.newDefaultUnpacker(payload).unpackValue();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The server's chunk hashes: LMCache's default blake3 chain, 32 bytes each. */
    private static byte[][] hashes(int[] tokens, int chunks) {
        byte[] raw = new byte[TokenHashChain.HASH_BYTES * chunks];
        TokenHashChain.blake3().hashChunks(tokens, CHUNK, 0, chunks, raw);
        byte[][] out = new byte[chunks][];
        for (int c = 0; c < chunks; c++) {
            out[c] = Arrays.copyOfRange(raw, TokenHashChain.HASH_BYTES * c, TokenHashChain.HASH_BYTES * (c + 1));
        }
        return out;
    }

    private static JsonNode status(ServerProcess server) {
        try {
            return new ObjectMapper().readTree(Http.get(server.httpBase() + "/status").body());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
