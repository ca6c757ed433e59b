package io.lmcache.server.it;

import static io.lmcache.server.testing.TestClient.pack;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.MalformedMessages;
import io.lmcache.server.testing.ServerExtension;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.time.Duration;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Each kind of bad input against the running server: a counter by reason, a failure value when
 * the client waits on the op, and the next valid request is answered.
 */
class BadInputIT {
    private static final byte[] NIL = {(byte) 0xc0};

    @RegisterExtension
    static final ServerExtension SERVER = ServerExtension.withFlags();

    /** The server is alive and answers a valid request on a fresh connection. */
    private static void assertStillServing() {
        assertTrue(server().isAlive(), "server process is alive");
        try (TestClient client = new TestClient(SERVER.endpoint())) {
            assertEquals("cd0100", client.call(21).payloadHex());
        }
    }

    private static double counter(String reason) {
        return Http.metric(server(), "lmcache_mp_bad_requests_total", "reason", reason);
    }

    private static ServerProcess server() {
        return SERVER.server();
    }

    private static double warnLines() {
        return Http.metric(server(), "lmcache_mp_log_lines_total", "level", "warn");
    }

    private static double garbage(String scrape) {
        return Http.metric(scrape, "lmcache_mp_bad_requests_total") + Http.metric(scrape, "lmcache_mp_unknown_ops_total");
    }

    @Test
    void truncatedMsgpack() {
        double before = counter("malformed_msgpack") + counter("oversized");
        try (TestClient client = new TestClient(SERVER.endpoint())) {
            byte[] key = WireProtocolIT.lookupKey("trunc");
            byte[] truncated = Arrays.copyOf(key, key.length - 40);
            TestClient.Reply reply = client.call(8, truncated, pack(p -> p.packInt(1)));
            assertNull(reply.payload(), "LOOKUP still gets its (None) reply");
        }
        assertEquals(before + 1, counter("malformed_msgpack") + counter("oversized"));
        assertStillServing();
    }

    @Test
    void wrongTypes() {
        double before = counter("wrong_type");
        try (TestClient client = new TestClient(SERVER.endpoint())) {
            // STORE with a string where the instance id (int) belongs: the failure value, (64 zero bytes, false)
            TestClient.Reply reply = client.call(6, WireProtocolIT.lookupKey("wrong"), pack(p -> p.packString("not-an-id")),
                    pack(p -> p.packArrayHeader(0)), pack(p -> p.packBinaryHeader(64).writePayload(new byte[64])));
            assertEquals("92c440" + "00".repeat(64) + "c2", reply.payloadHex());
        }
        assertEquals(before + 1, counter("wrong_type"));
        assertStillServing();
    }

    @Test
    void fewerThanThreeFrames() {
        double before = counter("fewer_than_3_frames");
        try (TestClient client = new TestClient(SERVER.endpoint())) {
            client.sendRaw(pack(p -> p.packInt(1)));
            assertNull(client.receive(Duration.ofMillis(300)), "nothing to correlate, nothing sent");
        }
        Awaits.until(() -> counter("fewer_than_3_frames") == before + 1);
        assertStillServing();
    }

    @Test
    void unknownExtensionCode() {
        double before = counter("bad_extension");
        try (TestClient client = new TestClient(SERVER.endpoint())) {
            byte[] wrappers = pack(p -> p.packArrayHeader(1).packExtensionTypeHeader((byte) 9, 4).writePayload(new byte[4]));
            TestClient.Reply reply = client.call(1, pack(p -> p.packLong(42)), wrappers, pack(p -> p.packString("m")));
            assertNull(reply.payload(), "REGISTER still gets its (None) reply");
        }
        assertEquals(before + 1, counter("bad_extension"));
        assertStillServing();
    }

    @Test
    void pickleNamingOsSystem() {
        double before = counter("pickle_rejected");
        byte[] evil = MalformedMessages.OS_SYSTEM_PICKLE;
        try (TestClient client = new TestClient(SERVER.endpoint())) {
            byte[] wrappers = pack(p -> p.packArrayHeader(1).packExtensionTypeHeader((byte) 1, evil.length).writePayload(evil));
            TestClient.Reply reply = client.call(1, pack(p -> p.packLong(43)), wrappers, pack(p -> p.packString("m")));
            assertNull(reply.payload());
        }
        assertEquals(before + 1, counter("pickle_rejected"));
        assertStillServing();
    }

    @Test
    void frameDeclaringAHundredMegabyteString() {
        double before = counter("oversized");
        try (TestClient client = new TestClient(SERVER.endpoint())) {
            TestClient.Reply reply = client.call(9, HexFormat.of().parseHex("db05f5e100616263"));
            assertEquals("00", reply.payloadHex());
        }
        assertEquals(before + 1, counter("oversized"));
        assertStillServing();
    }

    @Test
    void unknownOpGetsNoReplyAWarningAndACounter() {
        double before = Http.metric(server(), "lmcache_mp_unknown_ops_total");
        try (TestClient client = new TestClient(SERVER.endpoint())) {
            client.send(99);
            assertNull(client.receive(Duration.ofMillis(300)));
            assertEquals("a24f4b", client.call(24).payloadHex(), "the same connection keeps working");
        }
        assertEquals(before + 1, Http.metric(server(), "lmcache_mp_unknown_ops_total"));
    }

    @Test
    void unsupportedFeatureOpWarnsOnce() {
        double warningsBefore = warnLines();
        try (TestClient client = new TestClient(SERVER.endpoint())) {
            client.send(25, NIL);
            client.send(25, NIL);
            assertNull(client.receive(Duration.ofMillis(300)));
        }
        Awaits.until(() -> Http.metric(server(), "lmcache_mp_unsupported_ops_total", "op", "cb_register_rope") == 2
                && warnLines() > warningsBefore);
        assertEquals(warningsBefore + 1, warnLines(), "one warning for the feature, then only the counter");
    }

    @Test
    void tenThousandRandomFrames() {
        double suppressedBefore = Http.metric(server(), "lmcache_mp_log_suppressed_lines_total");
        double warningsBefore = warnLines();
        double garbageBefore = garbage(Http.get(SERVER.httpBase() + "/metrics").body());
        Random random = new Random(1234);
        try (TestClient client = new TestClient(SERVER.endpoint())) {
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
        String scrape = Http.get(SERVER.httpBase() + "/metrics").body();
        double garbage = garbage(scrape) - garbageBefore;
        assertTrue(garbage > 1000, "garbage is counted: " + garbage);
        double suppressed = Http.metric(scrape, "lmcache_mp_log_suppressed_lines_total") - suppressedBefore;
        double written = Http.metric(scrape, "lmcache_mp_log_lines_total", "level", "warn") - warningsBefore;
        assertTrue(suppressed > 0, "a flood is rate-limited: " + suppressed + " line(s) held back, " + written + " written");
        assertTrue(written < garbage / 2, "not logged line by line: " + written + " warning(s) for " + garbage + " bad request(s)");
    }
}
