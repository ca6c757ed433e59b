package io.lmcache.server.it;

import static io.lmcache.server.testing.TestClient.pack;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.nio.file.Files;
import java.time.Duration;
import java.util.Arrays;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * 100 000 bogus requests of the kinds a hostile or broken peer sends once per message (STOREs for
 * unknown instances, COMMIT_STOREs with no reservation, failing REGISTERs from 255-byte peer ids
 * with huge model names, wrong types, unknown ops, UNREGISTERs of unknown instances) add under
 * 1 MB of log: every such line is rate-limited per kind, and each request is still counted.
 */
@ExtendWith(ServerLogOnFailure.class)
class LogFloodIT {
    /** Requests sent before their replies are read: well under the server's per-peer send high-water mark (1 000 replies). */
    private static final int BATCH = 250;
    private static final long MAX_LOG_GROWTH_BYTES = 1 << 20;
    private static final byte[] EVENT = pack(p -> p.packBinaryHeader(64).writePayload(new byte[64]));
    private static final long ENGINE_INSTANCE = 7001;

    @Test
    @Timeout(300)
    void aHundredThousandBogusRequestsAddUnderOneMegabyteOfLog() throws Exception {
        try (ServerProcess server = ServerProcess.start();
             TestClient client = new TestClient(server.endpoint());
             TestClient longId = new TestClient(server.endpoint(), longIdentity())) {
            registerEngineDriven(client);
            String before = Http.get(server.httpBase() + "/metrics").body();
            long logBefore = Files.size(server.logFile());
            byte[] key = JavaWorker.cacheKey("flood/model", new JavaWorker.KeyTokens(JavaWorker.tokens(1, 256), 0, 256), "flood", 0, 1, 1);
            byte[] noWorkerKey = WireProtocolIT.lookupKey("flood");
            byte[] emptyList = pack(p -> p.packArrayHeader(0));
            byte[] hugeModel = pack(p -> p.packString("flood\n[forged] LMCache ERROR: not a real line " + "m".repeat(4096)));

            // STORE for an instance nobody registered: (event, false)
            flood(client, 30_000, true, i -> new Frames(6, key, pack(p -> p.packLong(100_000 + i)), emptyList, EVENT));
            // COMMIT_STORE of a registered engine-driven instance with nothing reserved: false
            flood(client, 20_000, true, i -> new Frames(17, key, pack(p -> p.packLong(ENGINE_INSTANCE)), pack(p -> p.packBinaryHeader(0))));
            // REGISTER with no tensors (a layout failure) from a 255-byte peer id, with a 4 KiB model name
            flood(longId, 20_000, true, i -> new Frames(1, pack(p -> p.packLong(200_000 + i)), emptyList, hugeModel));
            // STORE with a string where the instance id belongs: a decode failure, the failure value
            flood(client, 15_000, true, i -> new Frames(6, noWorkerKey, pack(p -> p.packString("not-an-id")), emptyList, EVENT));
            // UNREGISTER of instances that are not registered: None
            flood(client, 5_000, true, i -> new Frames(2, pack(p -> p.packLong(300_000 + i))));
            // an op id no table has: no reply at all
            flood(client, 10_000, false, i -> new Frames(99));

            Awaits.until(() -> delta(before, Http.get(server.httpBase() + "/metrics").body(), "lmcache_mp_unknown_ops_total") >= 10_000);
            long grownBytes = Files.size(server.logFile()) - logBefore;
            assertTrue(grownBytes < MAX_LOG_GROWTH_BYTES, "100 000 bogus requests grew the log by " + grownBytes + " bytes");

            String after = Http.get(server.httpBase() + "/metrics").body();
            assertEquals(30_000, delta(before, after, "lmcache_mp_transfer_failures_total", "op", "store", "reason", "unknown_instance"));
            assertEquals(20_000, delta(before, after, "lmcache_mp_engine_driven_failures_total", "op", "commit_store", "reason",
                    "no_reservation"));
            assertEquals(20_000, delta(before, after, "lmcache_mp_registration_failures_total"));
            assertEquals(15_000, delta(before, after, "lmcache_mp_bad_requests_total", "reason", "wrong_type"));
            assertEquals(5_000, delta(before, after, "lmcache_mp_unknown_unregisters_total", "mode", "lmcache_driven"));
            assertEquals(10_000, delta(before, after, "lmcache_mp_unknown_ops_total"));
            assertTrue(delta(before, after, "lmcache_mp_log_suppressed_lines_total") > 90_000, "the flood was held back, and counted");
            assertEquals(0, server.countLog("^\\[forged\\]"), "a newline from the wire never starts a line of its own");
            assertEquals("cd0100", client.call(21).payloadHex(), "still serving");
        }
    }

    /** Frames after uid: an op and its payloads. */
    private record Frames(int op, byte[]... payloads) {}

    /**
     * Sends {@code count} requests in pipelined batches; when they are answered, waits for each
     * batch's replies before the next (bounded: a missing reply fails within seconds).
     */
    private static void flood(TestClient client, int count, boolean answered, IntFunction<Frames> request) {
        for (int start = 0; start < count; start += BATCH) {
            int end = Math.min(count, start + BATCH);
            for (int i = start; i < end; i++) {
                Frames frames = request.apply(i);
                client.send(frames.op(), frames.payloads());
            }
            if (answered) {
                for (int i = start; i < end; i++) {
                    if (client.receive(Duration.ofSeconds(20)) == null) {
                        throw new AssertionError("request " + i + " of " + count + " was not answered within 20 s");
                    }
                }
            }
        }
    }

    private static void registerEngineDriven(TestClient client) {
        TestClient.Reply reply = client.call(14, pack(p -> {
            p.packMapHeader(9);
            p.packString("instance_id").packLong(ENGINE_INSTANCE);
            p.packString("model_name").packString("flood/model");
            p.packString("world_size").packInt(1);
            p.packString("block_size").packInt(16);
            p.packString("num_layers").packInt(2);
            p.packString("hidden_dim_size").packInt(64);
            p.packString("dtype_str").packString("bfloat16");
            p.packString("use_mla").packBoolean(false);
            p.packString("num_physical_slots").packInt(256);
        }));
        assertTrue(reply.payload() != null && reply.payload().length > 3, "engine-driven registration answered with the pool");
    }

    /** The longest identity ZeroMQ allows; a leading zero byte is reserved, so it starts with 'p'. */
    private static byte[] longIdentity() {
        byte[] identity = new byte[255];
        Arrays.fill(identity, (byte) 0xab);
        identity[0] = 'p';
        return identity;
    }

    private static double delta(String before, String after, String name, String... labels) {
        return Http.metric(after, name, labels) - Http.metric(before, name, labels);
    }
}
