package io.lmcache.server.it;

import static io.lmcache.server.testing.TestClient.pack;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.RawZmtpPeer;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import org.zeromq.ZMQ;
import org.zeromq.ZContext;
import org.zeromq.SocketType;

/**
 * Transport floods from hostile local peers (issue 13, items 2 to 4), on the real server: frame
 * lengths declared and never sent, peers that send and never read, and a JeroMQ I/O thread that
 * dies. A normal client keeps its PING answered within a second where the server can serve, and
 * {@code /healthcheck} tells the truth either way.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
@ExtendWith(ServerLogOnFailure.class)
class TransportFloodIT {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final byte[] NIL = {(byte) 0xc0};
    private static final byte[] PING_OP = pack(p -> p.packInt(22));
    private static final long MIB = 1L << 20;
    /** How long a reply may take before the test calls it lost: no figure of speed (see pingAnswered). */
    private static final Duration ANSWER_BOUND = Duration.ofSeconds(15);

    /**
     * Sends a PING (instance id None) and fails unless its reply (True) comes: the server keeps serving.
     * The bound is generous, for a loaded machine; how fast it answers under a flood is bench/run-flood.sh's figure.
     */
    private static void pingAnswered(TestClient client) {
        int uid = client.send(22, NIL);
        TestClient.Reply reply = client.receive(ANSWER_BOUND);
        assertNotNull(reply, "PING " + uid + " answered");
        assertEquals("c3", reply.payloadHex());
    }

    private static void assertHealthy(ServerProcess server) {
        HttpResponse<String> health = Http.get(server.httpBase() + "/healthcheck");
        assertEquals(200, health.statusCode(), health.body());
        assertTrue(status(server).get("is_healthy").asBoolean());
    }

    private static JsonNode status(ServerProcess server) {
        try {
            return JSON.readTree(Http.get(server.httpBase() + "/status").body());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static double directBytes(ServerProcess server) {
        return Http.metric(server, "jvm_buffer_memory_used_bytes", "id", "direct");
    }

    private static double heapBytes(ServerProcess server) {
        return Http.metric(server, "jvm_memory_used_bytes", "area", "heap");
    }

    /** The heap the server holds on to: used right after a full collection (jcmd GC.run, synchronous under ZGC). */
    private static double liveHeapBytes(ServerProcess server) throws IOException, InterruptedException {
        Process jcmd = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "jcmd").toString(), Long.toString(server.pid()),
                "GC.run").redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        assertTrue(jcmd.waitFor(30, TimeUnit.SECONDS) && jcmd.exitValue() == 0, "jcmd GC.run");
        return heapBytes(server);
    }

    /** RSS is measured once the pool is prefaulted, so the pool's pages are in the baseline. */
    private static void awaitPoolReady(ServerProcess server) {
        await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(100)).until(() -> {
            JsonNode l1 = status(server).at("/storage_manager/l1_manager");
            return l1.get("memory_ready_bytes").asLong() == l1.get("memory_total_bytes").asLong();
        });
    }

    @Test
    void framesDeclaredLongerThanTheCapCloseTheirConnectionBeforeAnythingIsAllocated() throws Exception {
        try (ServerProcess server = ServerProcess.start();
             TestClient client = new TestClient(server.endpoint())) {
            pingAnswered(client);
            double directBefore = directBytes(server);
            List<RawZmtpPeer> attackers = new CopyOnWriteArrayList<>();
            try {
                for (int i = 0; i < 5; i++) {
                    RawZmtpPeer attacker = RawZmtpPeer.connect(server.port(), 0);
                    attackers.add(attacker);
                    attacker.declareFrame(250 * MIB);
                }
                for (RawZmtpPeer attacker : attackers) {
                    assertTrue(attacker.closedByServer(Duration.ofSeconds(5)), "the server refuses a 250 MiB frame (cap 16 MiB)");
                }
                pingAnswered(client);
                assertTrue(directBytes(server) <= directBefore + 16 * MIB,
                        "no frame was allocated: direct memory " + directBytes(server) + " vs " + directBefore + " before");
                assertTrue(heapBytes(server) < 400 * MIB, "heap " + heapBytes(server));
                assertHealthy(server);
            } finally {
                attackers.forEach(RawZmtpPeer::close);
            }
            pingAnswered(client);
            assertHealthy(server);
            assertTrue(server.isAlive());
        }
    }

    /**
     * A reply echoes its request's uid frame: a peer that never reads and sends 4 MiB uids would make the server
     * hold 4 GiB at 1 000 queued replies. Such envelopes are no client's and are dropped unanswered, counted.
     */
    @Test
    void oversizedUidFramesFromAPeerThatNeverReadsAreDroppedUnanswered() throws Exception {
        try (ServerProcess server = ServerProcess.start();
             TestClient client = new TestClient(server.endpoint());
             ZContext context = new ZContext()) {
            pingAnswered(client);
            ZMQ.Socket attacker = context.createSocket(SocketType.DEALER);
            attacker.setSndHWM(0);
            attacker.connect(server.endpoint());
            byte[] bigUid = new byte[4 << 20];
            for (int i = 0; i < 300; i++) {
                attacker.send(bigUid, ZMQ.SNDMORE);
                attacker.send(PING_OP, ZMQ.SNDMORE);
                attacker.send(NIL, 0);
            }
            await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200))
                    .until(() -> Http.metric(server, "lmcache_mp_bad_requests_total", "reason", "oversized_envelope") == 300);
            pingAnswered(client);
            assertHealthy(server);
            assertEquals(null, attacker.recv(ZMQ.DONTWAIT), "no reply echoes an oversized uid");
        }
    }

    /**
     * JeroMQ allocates a frame whole when its length arrives: 80 connections each declaring a 16 MiB frame and
     * sending 100 bytes used to fill direct memory and kill its I/O thread. Now long frames share a budget (a
     * quarter of the heap); frames beyond it land in a shared sink and their requests get their failure value.
     */
    @Test
    void connectionsMidWayThroughMaximalFramesCostTheirOwnRequestsNotTheServer() throws Exception {
        try (ServerProcess server = ServerProcess.start();
             TestClient client = new TestClient(server.endpoint())) {
            pingAnswered(client);
            double directBefore = directBytes(server);
            List<RawZmtpPeer> attackers = new CopyOnWriteArrayList<>();
            try {
                // frames still arriving (a byte now and then) hold the budget; stalled ones would be closed within seconds
                AutoCloseable trickle = RawZmtpPeer.trickle(attackers);
                for (int i = 0; i < 80; i++) {
                    RawZmtpPeer attacker = RawZmtpPeer.connect(server.port(), 0);
                    attacker.declareFrame(16 * MIB);
                    attacker.write(new byte[100]);
                    attackers.add(attacker);
                }
                await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(100))
                        .until(() -> overBudget(server) >= 80 - FRAMES_IN_BUDGET);
                pingAnswered(client);
                // a request with a long frame while the budget is spent still gets its reply (the failure value); frames up to
                // 1 MiB still fit (the reserve), so the frame is longer
                double before = overBudget(server);
                double answeredBefore = Http.metric(server, "lmcache_mp_requests_over_frame_budget_total");
                client.send(22, NIL, new byte[LONG_FRAME_BYTES]);
                assertNotNull(client.receive(ANSWER_BOUND), "a request whose frame is over budget is answered");
                assertEquals(before + 1, overBudget(server));
                assertEquals(answeredBefore + 1, Http.metric(server, "lmcache_mp_requests_over_frame_budget_total"),
                        "answered with its failure value, not handled (its frame's bytes are garbage)");
                double held = Http.metric(server, "lmcache_mp_zeromq_frame_bytes_held");
                assertTrue(held <= FRAMES_IN_BUDGET * 16 * MIB, "bytes held " + held);
                assertTrue(directBytes(server) <= directBefore + 16 * MIB,
                        "frames are not in direct memory: " + directBytes(server) + " vs " + directBefore + " before");
                HttpResponse<String> health = Http.get(server.httpBase() + "/healthcheck");
                assertEquals(503, health.statusCode(), "degraded while long frames cannot come in (issue 45, N8)");
                assertTrue(health.body().contains("frame budget"), health.body());
                trickle.close();
            } finally {
                attackers.forEach(RawZmtpPeer::close);
            }
            // the abandoned frames' bytes come back (after a collection): long frames fit the budget again
            await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(200)).until(() -> {
                double before = overBudget(server);
                client.send(22, NIL, new byte[LONG_FRAME_BYTES]);
                return client.receive(ANSWER_BOUND) != null && overBudget(server) == before;
            });
            pingAnswered(client);
            assertEquals(0.0, Http.metric(server, "lmcache_mp_zeromq_io_thread_deaths_total"));
            // healthy again once no frame was refused for a few seconds
            await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(200))
                    .until(() -> Http.get(server.httpBase() + "/healthcheck").statusCode() == 200);
            assertHealthy(server);
        }
    }

    /** A quarter of the tests' heap (-Xmx512m) in 16 MiB frames (five of them fit: see FrameBudget's tiers). */
    private static final int FRAMES_IN_BUDGET = 8;
    /** Longer than the frames the budget's reserve is kept for (1 MiB). */
    private static final int LONG_FRAME_BYTES = 2 << 20;

    private static double overBudget(ServerProcess server) {
        return Http.metric(server, "lmcache_mp_zeromq_frames_over_budget_total");
    }

    /**
     * ZeroMQ queues a message's frames until its last one arrives and counts whole messages against the
     * high-water mark: a peer that never sends a last frame made the server hold every frame. The server
     * ends such a message at 63 frames; the pieces are no client's requests and are dropped.
     */
    @Test
    void aMessageThatNeverEndsIsCutAtTheFrameLimit() throws Exception {
        try (ServerProcess server = ServerProcess.start();
             TestClient client = new TestClient(server.endpoint());
             RawZmtpPeer attacker = RawZmtpPeer.connect(server.port(), 0)) {
            byte[] part = RawZmtpPeer.part(new byte[1024]);
            byte[] batch = new byte[part.length * 1000];
            for (int i = 0; i < 1000; i++) {
                System.arraycopy(part, 0, batch, i * part.length, part.length);
            }
            for (int i = 0; i < 100; i++) {
                attacker.write(batch);
            }
            // 100 000 frames, 63 to a message
            await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(100))
                    .until(() -> Http.metric(server, "lmcache_mp_zeromq_messages_cut_total") >= 100_000 / 63);
            pingAnswered(client);
            assertTrue(liveHeapBytes(server) < 200 * MIB, "live heap " + liveHeapBytes(server));
            assertHealthy(server);
        }
    }

    /**
     * A JeroMQ I/O thread that dies (an Error escaped its poller, as an exhausted direct memory did) leaves a
     * ROUTER that never answers again: the server stops and exits 3, so that a restart policy replaces it.
     */
    @Test
    void aDeadZeromqIoThreadStopsTheServerWithExitCode3() throws Exception {
        try (ServerProcess server = ServerProcess.start("--test-hooks", "--http-admin-token", "hooks");
             TestClient client = new TestClient(server.endpoint())) {
            assertHealthy(server);
            assertEquals(200, Http.post(server.httpBase() + "/test/fail-next-frame-allocation", "", "Authorization", "Bearer hooks").statusCode());
            client.send(22, NIL, new byte[8192]);
            assertTrue(server.process().waitFor(30, TimeUnit.SECONDS), "the server exits once the transport died");
            assertEquals(3, server.process().exitValue());
        }
    }

    /**
     * 20 peers send PINGs with 200-byte uids (every reply echoes one) and never read: before this issue
     * each could queue 100 000 replies, 2 GB in all, and the heap ran out. Now each has at most 1 000
     * queued and the rest are dropped and counted.
     */
    @Test
    void peersThatNeverReadLoseTheirRepliesAndNobodyElseSuffers() throws Exception {
        try (ServerProcess server = ServerProcess.start();
             TestClient client = new TestClient(server.endpoint())) {
            pingAnswered(client);
            awaitPoolReady(server);
            long rssBefore = L1TierIT.rssBytes(server.pid());
            double liveHeapBefore = liveHeapBytes(server);
            byte[] uid = pack(p -> p.packBinaryHeader(200).writePayload(new byte[200])); // the longest uid the server answers is 256 bytes
            byte[] ping = RawZmtpPeer.message(uid, PING_OP, NIL);
            byte[] batch = new byte[ping.length * 500];
            for (int i = 0; i < 500; i++) {
                System.arraycopy(ping, 0, batch, i * ping.length, ping.length);
            }
            List<RawZmtpPeer> attackers = new CopyOnWriteArrayList<>();
            ExecutorService writers = Executors.newFixedThreadPool(20);
            try {
                List<Future<?>> writing = new ArrayList<>();
                for (int i = 0; i < 20; i++) {
                    RawZmtpPeer attacker = RawZmtpPeer.connect(server.port(), 4096);
                    attackers.add(attacker);
                    // runs on: a writer pool thread (blocks while the server does not read, released by close)
                    writing.add(writers.submit(() -> {
                        for (int sent = 0; sent < 20_000; sent += 500) {
                            attacker.write(batch);
                        }
                        return null;
                    }));
                }
                long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
                while (!writing.stream().allMatch(Future::isDone) && System.nanoTime() < deadlineNs) {
                    pingAnswered(client);
                    assertEquals(200, Http.get(server.httpBase() + "/healthcheck").statusCode());
                    TimeUnit.MILLISECONDS.sleep(200);
                }
                for (Future<?> write : writing) {
                    write.get(1, TimeUnit.SECONDS);
                }
                await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(200))
                        .until(() -> Http.metric(server, "lmcache_mp_requests_total", "op", "ping") >= 20 * 20_000);
                double dropped = Http.metric(server, "lmcache_mp_replies_dropped_total", "reason", "peer_not_reading");
                assertTrue(dropped > 0, "replies to peers that do not read are dropped and counted: " + dropped);
                pingAnswered(client);
                // the attackers are still connected: their queued replies (1 000 each of about 200 bytes) are live
                double liveHeap = liveHeapBytes(server);
                assertTrue(liveHeap < liveHeapBefore + 96 * MIB, "live heap " + liveHeap / MIB + " MiB vs " + liveHeapBefore / MIB + " MiB before");
                // the heap may grow to its limit (-Xmx512m) with garbage before ZGC returns it; nothing else may grow
                long rssDuring = L1TierIT.rssBytes(server.pid());
                assertTrue(rssDuring < rssBefore + 512 * MIB + 128 * MIB, "RSS " + (rssDuring >> 20) + " MiB vs " + (rssBefore >> 20) + " MiB before");
                assertHealthy(server);
            } finally {
                attackers.forEach(RawZmtpPeer::close);
                writers.shutdownNow();
            }
            pingAnswered(client);
            assertHealthy(server);
        }
    }
}
