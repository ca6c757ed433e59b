package io.lmcache.server.it;

import static io.lmcache.server.testing.TestClient.pack;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Each kind of bad input against the running server: one clear log line, a counter, a failure
 * value when the client waits on the op, and the next valid request is answered.
 */
@ExtendWith(ServerLogOnFailure.class)
class BadInputIT {
    private static final byte[] NIL = {(byte) 0xc0};
    private static ServerProcess server;

    @BeforeAll
    static void start() {
        server = ServerProcess.start();
    }

    @AfterAll
    static void stop() {
        server.close();
    }

    /** The server is alive and answers a valid request on a fresh connection. */
    private static void assertStillServing() {
        assertTrue(server.isAlive(), "server process is alive");
        try (TestClient client = new TestClient(server.endpoint())) {
            assertEquals("cd0100", client.call(21).payloadHex());
        }
    }

    private static double counter(String reason) {
        return Http.metric(server, "lmcache_mp_bad_requests_total", "reason", reason);
    }

    @Test
    void truncatedMsgpack() {
        double before = counter("malformed_msgpack") + counter("oversized");
        try (TestClient client = new TestClient(server.endpoint())) {
            byte[] key = WireProtocolIT.lookupKey("trunc");
            byte[] truncated = java.util.Arrays.copyOf(key, key.length - 40);
            TestClient.Reply reply = client.call(8, truncated, pack(p -> p.packInt(1)));
            assertNull(reply.payload(), "LOOKUP still gets its (None) reply");
        }
        assertEquals(before + 1, counter("malformed_msgpack") + counter("oversized"));
        server.awaitLog("bad lookup request", Duration.ofSeconds(5));
        assertStillServing();
    }

    @Test
    void wrongTypes() {
        double before = counter("wrong_type");
        try (TestClient client = new TestClient(server.endpoint())) {
            // STORE with a string where the instance id (int) belongs: the failure value, (64 zero bytes, false)
            TestClient.Reply reply = client.call(6, WireProtocolIT.lookupKey("wrong"), pack(p -> p.packString("not-an-id")),
                    pack(p -> p.packArrayHeader(0)), pack(p -> p.packBinaryHeader(64).writePayload(new byte[64])));
            assertEquals("92c440" + "00".repeat(64) + "c2", reply.payloadHex());
        }
        assertEquals(before + 1, counter("wrong_type"));
        server.awaitLog("bad store request .*wrong_type", Duration.ofSeconds(5));
        assertStillServing();
    }

    @Test
    void fewerThanThreeFrames() {
        double before = counter("fewer_than_3_frames");
        try (TestClient client = new TestClient(server.endpoint())) {
            client.sendRaw(pack(p -> p.packInt(1)));
            assertNull(client.receive(Duration.ofMillis(300)), "nothing to correlate, nothing sent");
        }
        Awaits.until(() -> counter("fewer_than_3_frames") == before + 1);
        server.awaitLog("message with 2 frame\\(s\\) dropped", Duration.ofSeconds(5));
        assertStillServing();
    }

    @Test
    void unknownExtensionCode() {
        double before = counter("bad_extension");
        try (TestClient client = new TestClient(server.endpoint())) {
            byte[] wrappers = pack(p -> p.packArrayHeader(1).packExtensionTypeHeader((byte) 9, 4).writePayload(new byte[4]));
            TestClient.Reply reply = client.call(1, pack(p -> p.packLong(42)), wrappers, pack(p -> p.packString("m")));
            assertNull(reply.payload(), "REGISTER still gets its (None) reply");
        }
        assertEquals(before + 1, counter("bad_extension"));
        server.awaitLog("bad register_kv_cache request .*extension type 9", Duration.ofSeconds(5));
        assertStillServing();
    }

    @Test
    void pickleNamingOsSystem() {
        double before = counter("pickle_rejected");
        byte[] evil = HexFormat.of().parseHex("80049525000000000000008c05706f736978948c0673797374656d9493948c0a6563686f2070776e656494859452942e");
        try (TestClient client = new TestClient(server.endpoint())) {
            byte[] wrappers = pack(p -> p.packArrayHeader(1).packExtensionTypeHeader((byte) 1, evil.length).writePayload(evil));
            TestClient.Reply reply = client.call(1, pack(p -> p.packLong(43)), wrappers, pack(p -> p.packString("m")));
            assertNull(reply.payload());
        }
        assertEquals(before + 1, counter("pickle_rejected"));
        server.awaitLog("posix.system.*not on the allow-list", Duration.ofSeconds(5));
        assertStillServing();
    }

    @Test
    void frameDeclaringAHundredMegabyteString() {
        double before = counter("oversized");
        try (TestClient client = new TestClient(server.endpoint())) {
            TestClient.Reply reply = client.call(9, HexFormat.of().parseHex("db05f5e100616263"));
            assertEquals("00", reply.payloadHex());
        }
        assertEquals(before + 1, counter("oversized"));
        server.awaitLog("declares 100000000 byte", Duration.ofSeconds(5));
        assertStillServing();
    }

    @Test
    void unknownOpGetsNoReplyAWarningAndACounter() {
        double before = Http.metric(server, "lmcache_mp_unknown_ops_total");
        try (TestClient client = new TestClient(server.endpoint())) {
            client.send(99);
            assertNull(client.receive(Duration.ofMillis(300)));
            assertEquals("a24f4b", client.call(24).payloadHex(), "the same connection keeps working");
        }
        assertEquals(before + 1, Http.metric(server, "lmcache_mp_unknown_ops_total"));
        server.awaitLog("request with unknown op 63", Duration.ofSeconds(5));
    }

    @Test
    void unsupportedFeatureOpWarnsOnce() {
        try (TestClient client = new TestClient(server.endpoint())) {
            client.send(25, NIL);
            client.send(25, NIL);
            assertNull(client.receive(Duration.ofMillis(300)));
        }
        Awaits.until(() -> Http.metric(server, "lmcache_mp_unsupported_ops_total", "op", "cb_register_rope") == 2);
        assertEquals(1, server.countLog("cb_register_rope \\(op 25\\) is not supported"));
    }

    @Test
    void tenThousandRandomFrames() {
        Random random = new Random(1234);
        try (TestClient client = new TestClient(server.endpoint())) {
            for (int i = 0; i < 10_000; i++) {
                byte[][] frames = new byte[1 + random.nextInt(6)][];
                for (int f = 0; f < frames.length; f++) {
                    frames[f] = new byte[random.nextInt(48)];
                    random.nextBytes(frames[f]);
                }
                if (frames.length > 1 && random.nextBoolean()) {
                    // a valid op often, so the payload decoders see the garbage too
                    frames[1] = pack(p -> p.packInt(1 + random.nextInt(34)));
                }
                client.sendRaw(frames);
            }
            // every request the server accepted is answered or counted; the connection still works
            TestClient.Reply reply;
            int guard = 0;
            do {
                reply = client.receive(Duration.ofSeconds(2));
            } while (reply != null && ++guard < 20_000);
        }
        assertStillServing();
        String scrape = Http.get(server.httpBase() + "/metrics").body();
        assertTrue(Http.metric(scrape, "lmcache_mp_bad_requests_total") + Http.metric(scrape, "lmcache_mp_unknown_ops_total") > 1000,
                "garbage is counted");
        assertTrue(server.countLog("LMCache WARN") < 2000, "a flood is rate-limited, not logged line by line");
        // the count of suppressed lines is reported by the next warning after the flood's second
        try (TestClient client = new TestClient(server.endpoint())) {
            org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(250)).until(() -> {
                client.send(99);
                return server.log().contains("similar warning(s) suppressed");
            });
        }
    }
}
