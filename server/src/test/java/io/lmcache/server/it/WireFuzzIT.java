package io.lmcache.server.it;

import static io.lmcache.server.testing.TestClient.pack;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.testing.EngineDrivenWorker;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.nio.file.Path;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 45 (N1, item 7's fuzz): requests with random wire strings, now and then of a megabyte (request ids, model names, salts,
 * session ids), against a real server with every table that outlives a request in use (lookup results and leases, window-commit
 * sessions under {@code --commit-policy} with an L2 tier, an engine-driven worker's pending retrieves). Nothing is queried or
 * ended on purpose, so what the tables keep stays; afterwards each table's own byte gauge is within its bound and the server
 * answers. Bounded in time: the loop stops after {@link #BUDGET_S} seconds whatever it reached.
 */
@ExtendWith(ServerLogOnFailure.class)
class WireFuzzIT {
    private static final int BUDGET_S = 35;
    private static final int MAX_REQUESTS = 1500;
    private static final long INSTANCE = 4501;

    @TempDir
    Path dir;

    /** A wire string: mostly short (vLLM's ids are ~40 characters), one in 16 between 64 Ki and 1 Mi characters, some not ASCII. */
    private static String wire(Random random) {
        int length = random.nextInt(16) == 0 ? (64 << 10) + random.nextInt(960 << 10) : 1 + random.nextInt(300);
        StringBuilder out = new StringBuilder(length);
        char base = random.nextBoolean() ? 'a' : '\u00e0';
        for (int i = 0; i < length; i++) {
            out.append((char) (base + random.nextInt(26)));
        }
        return out.toString();
    }

    private static double table(String scrape, String table) {
        return Http.metric(scrape, "lmcache_mp_table_bytes", "table", table);
    }

    @Test
    void randomLongWireStringsLeaveEveryTableWithinItsBytes() throws Exception {
        String l2 = "{\"type\":\"fs_native\",\"base_path\":\"" + dir + "\"}";
        try (ServerProcess server = ServerProcess.start("--l1-size-gb", "0.0625", "--l2-adapter", l2, "--commit-policy", "stop_token");
             EngineDrivenWorker engine = new EngineDrivenWorker(server.endpoint(), INSTANCE, "fuzz/model", 4, 128);
             TestClient client = new TestClient(server.endpoint())) {
            engine.register();
            Random random = new Random(45);
            int[] tokens = JavaWorker.tokens(45, 512);
            long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(BUDGET_S);
            int sent = 0;
            int lookups = 0;
            while (sent < MAX_REQUESTS && System.nanoTime() - deadlineNs < 0) {
                String requestId = wire(random);
                byte[] key;
                switch (random.nextInt(4)) {
                    case 0, 1 -> { // LOOKUP, never queried: its result and session stay
                        key = JavaWorker.cacheKey(wire(random), wire(random), new JavaWorker.KeyTokens(tokens, 0, 512), requestId, null, 1, 1);
                        client.call(8, key, pack(p -> p.packInt(1)));
                        lookups++;
                    }
                    case 2 -> client.call(9, pack(p -> p.packString(requestId))); // QUERY_PREFETCH_STATUS of an unknown id
                    default -> { // engine-driven PREPARE_RETRIEVE, a miss whose COMMIT_RETRIEVE never comes
                        key = JavaWorker.cacheKey(wire(random), wire(random), new JavaWorker.KeyTokens(tokens, 0, 512), requestId, 0, 1, 1);
                        client.call(18, key, pack(p -> p.packLong(INSTANCE)));
                    }
                }
                sent++;
            }
            assertTrue(lookups > 100, "the loop reached " + sent + " requests in " + BUDGET_S + " s");
            String scrape = Http.get(server.httpBase() + "/metrics").body();
            double results = table(scrape, "lookup_results");
            double sessions = table(scrape, "window_sessions");
            double leases = table(scrape, "lookup_leases");
            assertTrue(results > 0 && results < lookups * 1024.0, "lookup results keep digests of long ids: " + results + " bytes");
            assertTrue(sessions > 0 && sessions <= 32 << 20, "window sessions within their 32 MiB: " + sessions);
            assertTrue(leases <= 64 << 20, "leases within their 64 MiB: " + leases);
            JsonNode status = new ObjectMapper().readTree(Http.get(server.httpBase() + "/status").body());
            JsonNode meta = status.findValue("non_cuda_context_meta").get(Long.toString(INSTANCE));
            assertTrue(meta.get("pending_retrieves").asInt() <= 1024, "remembered misses capped: " + meta);
            assertTrue(meta.get("model_name").asText().length() < 300);
            assertEquals("cd0100", client.call(21).payloadHex(), "the server still answers (GET_CHUNK_SIZE: 256)");
        }
    }
}
