package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.io.IOException;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@code --eviction-policy} on the real server, through the protocol: a hot set read twice and then a one-off scan of
 * 2.5 pools (LRU loses the hot set, ARC and S3FIFO keep it, noop refuses the scan's stores), and IsolatedLRU's tenants
 * under pressure (the one over its {@code /quota} gives its chunks first; the other keeps all of its own).
 */
@ExtendWith(ServerLogOnFailure.class)
class EvictionPolicyIT {
    private static final int CHUNK = 256;
    /** 8 MiB chunk objects: a 128 MiB pool holds 16. */
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(8, 32, 16, 8, 128);
    private static final long OBJECT_BYTES = GEOMETRY.chunkObjectBytes(CHUNK);
    private static final int[] CHUNK_BLOCKS = JavaWorker.range(0, CHUNK / 16);
    private static final int[] TARGET = JavaWorker.range(16, CHUNK / 16);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int HOT = 3;
    private static final String TOKEN = "eviction-it-token";
    private static final String[] AUTH = {"Authorization", "Bearer " + TOKEN};

    private static int[] prefix(int i) {
        int[] tokens = JavaWorker.tokens(5000 + i, CHUNK);
        tokens[0] = i;
        return tokens;
    }

    /** A hit as vLLM makes it: LOOKUP with one reader, RETRIEVE, the lookup's locks freed. */
    private static void hit(JavaWorker worker, int i, String id) {
        assertEquals(1, worker.lookup(prefix(i), CHUNK, id, 1, 1), "chunk " + i + " hits");
        assertTrue(worker.retrieve(prefix(i), 0, CHUNK, TARGET, 0, id));
        worker.freeLookupLocks(prefix(i), 0, CHUNK, id);
    }

    private static JsonNode json(String url) throws IOException {
        return JSON.readTree(Http.get(url).body());
    }

    @ParameterizedTest
    @ValueSource(strings = {"LRU", "ARC", "S3FIFO", "noop"})
    void aOneOffScanAgainstAHotSet(String policy) throws Exception {
        try (ServerProcess server = ServerProcess.start(Map.of(), "--l1-size-gb", "0.125", "--eviction-policy", policy,
                "--http-admin-token", TOKEN);
             JavaWorker worker = new JavaWorker(server.endpoint(), 31, "scan/model", GEOMETRY)) {
            worker.register();
            worker.fill(CHUNK_BLOCKS, 3);
            for (int i = 0; i < HOT; i++) {
                assertTrue(worker.store(prefix(i), 0, CHUNK, CHUNK_BLOCKS, "hot-" + i));
            }
            for (int pass = 0; pass < 2; pass++) {
                for (int i = 0; i < HOT; i++) {
                    hit(worker, i, "read-" + pass + "-" + i);
                }
            }
            int stored = 0;
            for (int i = 100; i < 140; i++) {
                stored += worker.store(prefix(i), 0, CHUNK, CHUNK_BLOCKS, "scan-" + i) ? 1 : 0;
            }
            int hotLeft = 0;
            for (int i = 0; i < HOT; i++) {
                hotLeft += worker.lookup(prefix(i), CHUNK, "after-" + i, 1, 0);
            }
            JsonNode status = json(server.httpBase() + "/status");
            JsonNode state = status.findValue("policy_state");
            assertEquals(policy, state.get("policy").asText(), status.toString());
            assertEquals(policy, json(server.httpBase() + "/config").findValue("eviction_policy").asText());
            switch (policy) {
                case "LRU" -> assertEquals(0, hotLeft, "LRU lost the hot set to the scan");
                case "noop" -> {
                    assertEquals(HOT, hotLeft, "noop never evicts");
                    assertTrue(stored < 16, "so the scan's stores failed once the pool was full: " + stored + " stored");
                    assertEquals(0, Http.metric(server, "lmcache_mp_l1_evicted_chunks_total", "reason", "demand"), 0.0);
                }
                default -> {
                    assertEquals(HOT, hotLeft, policy + " kept the hot set: " + state);
                    assertEquals(40, stored);
                }
            }
            if (policy.equals("ARC")) {
                assertTrue(state.get("t2_objects").asInt() >= HOT, "the hot set is in T2: " + state);
            } else if (policy.equals("S3FIFO")) {
                assertEquals(HOT, state.get("promoted_to_main").asInt(), state.toString());
            }
            assertEquals(409, Http.post(server.httpBase() + "/quota", "{\"tenant\": \"a\", \"quota_bytes\": 1}", AUTH).statusCode(),
                    "only IsolatedLRU keeps quotas");
        }
    }

    /**
     * Issue 45 N10: with a hot set in T2 and T1's target at 0, a watermark pass emptied T1, taking chunks stored a moment
     * before their first LOOKUP. The pass now stops at T1's young objects.
     */
    @Test
    void arcKeepsFreshStoresForTheirFirstLookup() throws Exception {
        try (ServerProcess server = ServerProcess.start(Map.of(), "--l1-size-gb", "0.125", "--eviction-policy", "ARC");
             JavaWorker worker = new JavaWorker(server.endpoint(), 33, "fresh/model", GEOMETRY)) {
            worker.register();
            worker.fill(CHUNK_BLOCKS, 6);
            for (int i = 0; i < 11; i++) {
                assertTrue(worker.store(prefix(i), 0, CHUNK, CHUNK_BLOCKS, "hot-" + i));
                hit(worker, i, "hot-read-a-" + i);
                hit(worker, i, "hot-read-b-" + i);
            }
            for (int i = 100; i < 103; i++) {
                assertTrue(worker.store(prefix(i), 0, CHUNK, CHUNK_BLOCKS, "fresh-" + i)); // 14 of 16: above the watermark
            }
            double ticks = Http.metric(server, "lmcache_mp_l1_eviction_loop_ticks_total");
            await().atMost(Duration.ofSeconds(20)).until(() -> Http.metric(server, "lmcache_mp_l1_eviction_loop_ticks_total") >= ticks + 2);
            JsonNode state = json(server.httpBase() + "/status").findValue("policy_state");
            for (int i = 100; i < 103; i++) {
                assertEquals(1, worker.lookup(prefix(i), CHUNK, "fresh-look-" + i, 1, 0), "fresh chunk " + i + " survived: " + state);
            }
            assertTrue(state.get("young_spared").asInt() > 0, "the passes stopped at T1's young objects: " + state);
        }
    }

    @Test
    void aTenantOverItsQuotaGivesItsChunksFirst() throws Exception {
        try (ServerProcess server = ServerProcess.start(Map.of(), "--l1-size-gb", "0.125", "--eviction-policy", "IsolatedLRU",
                "--http-admin-token", TOKEN);
             JavaWorker a = new JavaWorker(server.endpoint(), 41, "tenant/model", GEOMETRY).salt("a");
             JavaWorker b = new JavaWorker(server.endpoint(), 42, "tenant/model", GEOMETRY).salt("b")) {
            a.register();
            b.register();
            a.fill(CHUNK_BLOCKS, 4);
            b.fill(CHUNK_BLOCKS, 5);
            String quota = server.httpBase() + "/quota";
            assertEquals(401, Http.post(quota, "{\"tenant\": \"a\", \"quota_bytes\": 0}").statusCode(), "the token, also on loopback");
            assertEquals(400, Http.post(quota, "{\"tenant\": \"a\"}", AUTH).statusCode());
            assertEquals(415, Http.post(quota, "{}", "Content-Type", "text/plain", AUTH[0], AUTH[1]).statusCode(), "the admin rules apply");
            assertEquals(200, Http.post(quota, "{\"tenant\": \"a\", \"quota_bytes\": " + 2 * OBJECT_BYTES + "}", AUTH).statusCode());
            // b's chunks are the oldest: LRU would take them first
            for (int i = 0; i < 4; i++) {
                assertTrue(b.store(prefix(i), 0, CHUNK, CHUNK_BLOCKS, "b-" + i));
            }
            for (int i = 0; i < 8; i++) {
                assertTrue(a.store(prefix(100 + i), 0, CHUNK, CHUNK_BLOCKS, "a-" + i));
            }
            for (int i = 4; i < 8; i++) {
                // 16 chunks into a pool of 16: the passes at the watermark take a's, over its quota, while b stays within the
                // default bucket's share (what a's quota leaves); past that, the bucket's own oldest would go
                assertTrue(b.store(prefix(i), 0, CHUNK, CHUNK_BLOCKS, "b-" + i));
            }
            await().atMost(Duration.ofSeconds(20)).until(() -> json(server.httpBase() + "/status").findValue("policy_state")
                    .get("quota_evictions").asInt() >= 2);
            for (int i = 0; i < 8; i++) {
                assertEquals(1, b.lookup(prefix(i), CHUNK, "b-look-" + i, 1, 0), "b, in the default bucket (what a's quota leaves), kept chunk " + i);
            }
            JsonNode tenants = JSON.readTree(Http.get(quota, AUTH).body()).get("tenants");
            JsonNode tenantA = null;
            for (JsonNode t : tenants) {
                if (t.get("tenant").asText().equals("a")) {
                    tenantA = t;
                }
            }
            assertTrue(tenantA != null && tenantA.get("used_bytes").asLong() <= 6 * OBJECT_BYTES, "a gave its chunks: " + tenants);
            assertEquals(2 * OBJECT_BYTES, tenantA.get("quota_bytes").asLong());
            assertFalse(a.lookup(prefix(100), CHUNK, "a-look", 1, 0) == 1, "a's least recently used chunk went first");
        }
    }
}
