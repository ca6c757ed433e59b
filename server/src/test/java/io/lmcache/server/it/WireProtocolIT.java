package io.lmcache.server.it;

import static io.lmcache.server.testing.TestClient.pack;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.lmcache.server.testing.ServerExtension;
import io.lmcache.server.testing.TestClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** The worked examples of protocol doc §3.3 against the real server process, byte for byte. */
class WireProtocolIT {
    @RegisterExtension
    static final ServerExtension SERVER = ServerExtension.withFlags();

    private static String hex(byte[] bytes) {
        return HexFormat.of().formatHex(bytes);
    }

    @Test
    void workedExamples() {
        try (TestClient client = new TestClient(SERVER.endpoint())) {
            TestClient.Reply chunk = client.call(21);
            assertEquals("00", hex(chunk.uid()));
            assertEquals("15", hex(chunk.op()));
            assertEquals("cd0100", chunk.payloadHex());

            TestClient.Reply ping = client.call(22, pack(p -> p.packLong(0x1234567890ABCDEFL)));
            assertEquals("c3", ping.payloadHex());
            assertEquals("c3", client.call(22, new byte[] {(byte) 0xc0}).payloadHex(), "the scheduler's PING(None)");
            assertEquals("a24f4b", client.call(24).payloadHex());
            // GET_EXPERIMENTAL: the KV-event channel's names while its log is on (the default), as kv-events.md §7 says
            assertEquals("92af6b765f6576656e745f73747265616da96b765f6576656e7473", client.call(32).payloadHex());

            TestClient.Reply lookup = client.call(8, lookupKey("req-1"), pack(p -> p.packInt(1)));
            assertNull(lookup.payload(), "LOOKUP replies with no payload frame");
            assertEquals(2, lookup.frames());
            TestClient.Reply end = client.call(13, pack(p -> p.packString("req-1")));
            assertNull(end.payload(), "END_SESSION replies with no payload frame");
            TestClient.Reply end2 = client.call(13, pack(p -> p.packString("req-1")), new byte[] {(byte) 0xc0});
            assertNull(end2.payload(), "the 2-frame END_SESSION too");
        }
    }

    @Test
    void uidAndOpFramesAreEchoedByteForByte() {
        try (TestClient client = new TestClient(SERVER.endpoint())) {
            // uids of every msgpack width, and the op as a string name
            for (byte[] uid : List.of(pack(p -> p.packInt(5)), pack(p -> p.packInt(200)), pack(p -> p.packInt(70_000)),
                    pack(p -> p.packLong(5_000_000_000L)))) {
                byte[] op = pack(p -> p.packString("noop"));
                client.sendRaw(uid, op);
                TestClient.Reply reply = client.receive(Duration.ofSeconds(5));
                assertNotNull(reply);
                assertArrayEquals(uid, reply.uid());
                assertArrayEquals(op, reply.op());
                assertEquals("a24f4b", reply.payloadHex());
            }
        }
    }

    /** Replies may come back in any order; the client correlates them by uid alone. */
    @Test
    void pipelinedRepliesCorrelateByUid() {
        try (TestClient client = new TestClient(SERVER.endpoint())) {
            Map<String, String> expected = new HashMap<>();
            for (int i = 0; i < 300; i++) {
                int uid = switch (i % 3) {
                    case 0 -> client.send(21);                                       // SYNC
                    case 1 -> client.send(9, pack(p -> p.packString("unknown-req"))); // NORMAL
                    default -> client.send(22, pack(p -> p.packInt(7)));             // PING lane
                };
                expected.put(hex(pack(p -> p.packInt(uid))), switch (i % 3) {
                    case 0 -> "cd0100";
                    case 1 -> "00";
                    default -> "c3";
                });
            }
            List<String> order = new ArrayList<>();
            for (int i = 0; i < 300; i++) {
                TestClient.Reply reply = client.receive(Duration.ofSeconds(10));
                assertNotNull(reply, "reply " + i);
                String uid = hex(reply.uid());
                assertEquals(expected.remove(uid), reply.payloadHex(), "reply for uid " + uid);
                order.add(uid);
            }
            assertEquals(Map.of(), expected, "every request answered exactly once");
        }
    }

    @Test
    void twentyConcurrentDealers() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(20);
        try {
            List<Future<Integer>> results = new ArrayList<>();
            for (int c = 0; c < 20; c++) {
                long instance = 1000 + c;
                results.add(pool.submit(() -> {
                    try (TestClient client = new TestClient(SERVER.endpoint())) {
                        int ok = 0;
                        for (int i = 0; i < 100; i++) {
                            assertEquals("cd0100", client.call(21).payloadHex());
                            assertEquals("c3", client.call(22, pack(p -> p.packLong(instance))).payloadHex());
                            assertEquals("00", client.call(9, pack(p -> p.packString("r" + instance))).payloadHex());
                            ok++;
                        }
                        return ok;
                    }
                }));
            }
            for (Future<Integer> result : results) {
                assertEquals(100, result.get());
            }
        } finally {
            pool.shutdownNow();
        }
    }

    static byte[] lookupKey(String requestId) {
        return pack(p -> {
            p.packMapHeader(10);
            p.packString("model_name").packString("test/model");
            p.packString("world_size").packInt(1);
            p.packString("worker_id").packNil();
            p.packString("token_ids").packArrayHeader(256);
            for (int i = 0; i < 256; i++) {
                p.packInt(i);
            }
            p.packString("start").packInt(0);
            p.packString("end").packInt(256);
            p.packString("request_id").packString(requestId);
            p.packString("cache_salt").packString("");
            p.packString("request_configs").packNil();
            p.packString("num_kv_readers").packInt(1);
        });
    }
}
