package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ReferenceCoordinator;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * LMCache's warm prefetch and L2 listing (issue 49, fleet-and-operator-api.md §2.1, §2.2) on the real server over fs_native: chunks
 * written through to L2 and cleared from L1 come back into L1 by {@code POST /cache/prefetches}, retained and unlocked (a LOOKUP
 * then hits them in L1, nothing from L2; the coordinator hears them as L1 store events); the completion is reported once, then
 * 404; keys already resident count in {@code missing_key_indices}; a salted chunk is reached only with its salt;
 * {@code GET /cache/objects} pages through the adapter's objects.
 */
@ExtendWith(ServerLogOnFailure.class)
class WarmPrefetchIT {
    private static final int CHUNK = 256;
    private static final int CHUNKS = 4;
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(2, 128, 16, 2, 64);
    private static final String MODEL = "warm/model";
    private static final String TOKEN = "warm-admin-token";
    private static final String AUTH = "Bearer " + TOKEN;
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Duration WAIT = Duration.ofSeconds(20);
    private static final int[] TOKENS = JavaWorker.tokens(21, CHUNKS * CHUNK);

    @TempDir
    Path dir;

    @Test
    void prefetchBringsL2ChunksBackIntoL1OnceReportedAndListingPagesThroughTheAdapter() throws Exception {
        try (ReferenceCoordinator coordinator = ReferenceCoordinator.start("127.0.0.2");
             ServerProcess server = ServerProcess.start(Map.of(), "--l1-size-gb", "0.0625", "--l2-adapter",
                "{\"type\":\"fs_native\",\"base_path\":\"" + dir + "\"}", "--http-admin-token", TOKEN, "--chunk-size", Integer.toString(CHUNK),
                "--coordinator-url", coordinator.url(), "--coordinator-advertise-ip", "127.0.0.1", "--coordinator-heartbeat-interval", "0.2",
                "--coordinator-event-reporting", "--coordinator-event-flush-interval", "0.1", "--instance-id", "warm-a");
             JavaWorker worker = new JavaWorker(server.endpoint(), 51, MODEL, GEOMETRY)) {
            worker.register();
            int[] blocks = JavaWorker.range(0, CHUNKS * CHUNK / 16);
            worker.fill(blocks, 5);
            assertTrue(worker.store(TOKENS, 0, CHUNKS * CHUNK, blocks, "store"));
            await("write-through").atMost(WAIT).until(() -> Http.metric(server, "lmcache_mp_l2_store_completed_objects_chunks_total") >= CHUNKS);
            clearL1(server);

            // the first two chunks, then all four: the two resident already are missing from the second load
            JsonNode first = completed(server, submit(server, prefetch(Arrays.copyOf(TOKENS, 2 * CHUNK + 7), "")));
            assertEquals(2, first.path("found_keys").asInt(), first.toString());
            assertEquals(2, first.path("total_keys").asInt());
            assertEquals(0, first.path("missing_key_indices").size(), first.toString());
            String all = submit(server, prefetch(TOKENS, ""));
            JsonNode second = completed(server, all);
            assertEquals(2, second.path("found_keys").asInt(), second.toString());
            assertEquals(CHUNKS, second.path("total_keys").asInt());
            assertEquals(List.of(0, 1), ints(second.path("missing_key_indices")), "resident before this load: missing " + second);
            HttpResponse again = get(server, "/cache/prefetches/" + all, true);
            assertEquals(404, again.status(), "reported once: " + again.body());

            assertEquals(CHUNKS, Http.metric(server, "lmcache_mp_l1_objects"), "retained: the loaded objects stay in L1 with no reader");
            double l2Hits = Http.metric(server, "lmcache_mp_lookup_hit_l2_tokens_total");
            assertEquals(CHUNKS, worker.lookup(TOKENS, CHUNKS * CHUNK, "after-warm", 1, 1), "unlocked and re-lookupable");
            worker.freeLookupLocks(TOKENS, 0, CHUNKS * CHUNK, "after-warm");
            assertEquals(CHUNKS * CHUNK, Http.metric(server, "lmcache_mp_lookup_hit_l1_tokens_total"), "the LOOKUP hit L1");
            assertEquals(l2Hits, Http.metric(server, "lmcache_mp_lookup_hit_l2_tokens_total"), "and loaded nothing from L2");

            fromTheCoordinator(server, coordinator);
            saltedChunkOnlyWithItsSalt(server, worker);
            refusals(server);
            listing(server);
        }
    }

    /** The coordinator calls without a token from its own address (LMCache's sends none): a prefetch, its poll, the listing. */
    private static void fromTheCoordinator(ServerProcess server, ReferenceCoordinator coordinator) throws Exception {
        await().atMost(WAIT).until(() -> !coordinator.instances().isEmpty());
        clearL1(server);
        await().atMost(WAIT).until(() -> l1Placements(coordinator) == 0);
        var submitted = coordinator.call("warm-a", "POST", "/cache/prefetches", prefetch(TOKENS, ""));
        assertEquals(202, submitted.statusCode(), submitted.body());
        String id = JSON.readTree(submitted.body()).path("request_id").asText();
        JsonNode[] done = {null};
        await().atMost(WAIT).until(() -> {
            var polled = coordinator.call("warm-a", "GET", "/cache/prefetches/" + id, null);
            assertEquals(200, polled.statusCode(), polled.body());
            JsonNode json = JSON.readTree(polled.body());
            done[0] = json.path("status").asText().equals("completed") ? json : null;
            return done[0] != null;
        });
        assertEquals(CHUNKS, done[0].path("found_keys").asInt(), done[0].toString());
        await("the loads announced as L1 store events").atMost(WAIT).until(() -> l1Placements(coordinator) == CHUNKS);
        assertEquals(404, coordinator.call("warm-a", "GET", "/cache/prefetches/" + id, null).statusCode());
        var listed = coordinator.call("warm-a", "GET", "/cache/objects?tier=l2", null);
        assertEquals(200, listed.statusCode(), listed.body());
        assertEquals(CHUNKS, JSON.readTree(listed.body()).path("entries").size());
    }

    private static long l1Placements(ReferenceCoordinator coordinator) {
        return coordinator.placements().stream().filter(p -> p.tier().equals("l1") && p.instanceId().equals("warm-a")).count();
    }

    /** A salted chunk in L2: a prefetch without the salt or with another finds nothing; with it, the chunk. */
    private void saltedChunkOnlyWithItsSalt(ServerProcess server, JavaWorker worker) throws Exception {
        int[] tokens = JavaWorker.tokens(22, CHUNK);
        double before = Http.metric(server, "lmcache_mp_l2_store_completed_objects_chunks_total");
        assertTrue(worker.salt("tenant-a").store(tokens, 0, CHUNK, JavaWorker.range(0, CHUNK / 16), "salted-store"));
        await("salted write-through").atMost(WAIT).until(() ->
                Http.metric(server, "lmcache_mp_l2_store_completed_objects_chunks_total") >= before + 1);
        worker.salt("");
        clearL1(server);
        assertEquals(0, completed(server, submit(server, prefetch(tokens, ""))).path("found_keys").asInt(), "no salt: another tenant's");
        assertEquals(0, completed(server, submit(server, prefetch(tokens, "tenant-b"))).path("found_keys").asInt(), "another salt");
        assertEquals(1, completed(server, submit(server, prefetch(tokens, "tenant-a"))).path("found_keys").asInt(), "its own salt");
    }

    private static void refusals(ServerProcess server) throws Exception {
        Map<String, Object> body = prefetch(TOKENS, "");
        assertEquals(401, post(server, body, false).status(), "the admin token, or the coordinator's address");
        body.put("source_tier", "l1");
        body.put("target_tier", "l2");
        assertEquals(400, post(server, body, true).status(), "only l2 -> l1");
        Map<String, Object> unknown = prefetch(TOKENS, "");
        unknown.put("model_name", "other/model");
        assertEquals(503, post(server, unknown, true).status(), "no layout registered: LMCache's 503");
        Map<String, Object> tagged = prefetch(TOKENS, "");
        tagged.put("tags", Map.of("tenant", "a"));
        assertEquals(400, post(server, tagged, true).status(), "tags on an L2 operation");
        Map<String, Object> badType = prefetch(TOKENS, "");
        badType.put("world_size", "one");
        assertEquals(422, post(server, badType, true).status());
        HttpResponse noop = post(server, prefetch(Arrays.copyOf(TOKENS, CHUNK - 1), ""), true);
        assertEquals(202, noop.status());
        assertEquals("noop", JSON.readTree(noop.body()).path("status").asText(), noop.body());
        assertEquals(404, get(server, "/cache/prefetches/never-submitted", true).status());
        assertEquals(1, Http.metric(server, "lmcache_mp_warm_prefetch_requests_total", "outcome", "noop"));
    }

    /** Pages of two through the adapter's five objects: each once, with its size; a model filter, a bad token, tier l1. */
    private static void listing(ServerProcess server) throws Exception {
        Set<String> seen = new HashSet<>();
        String token = "";
        int pages = 0;
        do {
            HttpResponse page = get(server, "/cache/objects?tier=l2&page_size=2&page_token=" + token, true);
            assertEquals(200, page.status(), page.body());
            JsonNode reply = JSON.readTree(page.body());
            assertEquals("FSNativeL2Adapter", reply.path("adapter").asText());
            assertFalse(reply.path("shared").asBoolean());
            for (JsonNode entry : reply.path("entries")) {
                assertTrue(seen.add(entry.path("key").toString()), "listed once: " + entry);
                assertEquals(GEOMETRY.chunkObjectBytes(CHUNK), entry.path("size_bytes").asLong());
                assertEquals(MODEL, entry.path("key").path("model_name").asText());
            }
            token = reply.path("next_page_token").isNull() ? null : reply.path("next_page_token").asText();
            pages++;
        } while (token != null && pages < 10);
        assertEquals(CHUNKS + 1, seen.size(), "every object: " + seen);
        assertEquals(3, pages);
        assertEquals(1, seen.stream().filter(k -> k.contains("\"cache_salt\":\"tenant-a\"")).count(), "the salted one, with its salt");
        assertEquals(401, get(server, "/cache/objects?tier=l2", false).status());
        assertEquals(0, JSON.readTree(get(server, "/cache/objects?model_name=other", true).body()).path("entries").size());
        assertEquals(400, get(server, "/cache/objects?page_token=bm90LWEtbmFtZQ", true).status(), "a token the adapter never gave");
        assertEquals(400, get(server, "/cache/objects?tier=l1", true).status());
        assertEquals(400, get(server, "/cache/objects?page_size=5001", true).status());
    }

    private static Map<String, Object> prefetch(int[] tokens, String salt) {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("model_name", MODEL);
        body.put("world_size", 1);
        body.put("token_ids", tokens);
        body.put("cache_salt", salt);
        body.put("source_tier", "l2");
        body.put("target_tier", "l1");
        return body;
    }

    private static String submit(ServerProcess server, Map<String, Object> body) throws Exception {
        HttpResponse reply = post(server, body, true);
        assertEquals(202, reply.status(), reply.body());
        JsonNode json = JSON.readTree(reply.body());
        assertEquals("submitted", json.path("status").asText(), reply.body());
        return json.path("request_id").asText();
    }

    /** Polls until completed (LMCache's mover polls every 0.5 s); the completed reply. */
    private static JsonNode completed(ServerProcess server, String requestId) throws Exception {
        JsonNode[] done = {null};
        await("prefetch " + requestId).atMost(WAIT).pollInterval(Duration.ofMillis(20)).until(() -> {
            HttpResponse reply = get(server, "/cache/prefetches/" + requestId, true);
            assertEquals(200, reply.status(), reply.body());
            JsonNode json = JSON.readTree(reply.body());
            assertEquals(requestId, json.path("request_id").asText());
            done[0] = json.path("status").asText().equals("completed") ? json : null;
            return done[0] != null;
        });
        return done[0];
    }

    private static void clearL1(ServerProcess server) {
        await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(20)).until(() -> {
            assertEquals(200, Http.post(server.httpBase() + "/cache/clear", "{\"tier\": \"l1\"}", "Content-Type", "application/json",
                    "Authorization", AUTH).statusCode());
            return Http.metric(server, "lmcache_mp_l1_objects") == 0;
        });
    }

    private static List<Integer> ints(JsonNode array) {
        List<Integer> out = new ArrayList<>();
        array.forEach(n -> out.add(n.asInt()));
        return out;
    }

    private record HttpResponse(int status, String body) {}

    private static HttpResponse post(ServerProcess server, Map<String, Object> body, boolean withToken) throws Exception {
        String json = JSON.writeValueAsString(body);
        var reply = withToken ? Http.post(server.httpBase() + "/cache/prefetches", json, "Content-Type", "application/json", "Authorization", AUTH)
                : Http.post(server.httpBase() + "/cache/prefetches", json, "Content-Type", "application/json");
        return new HttpResponse(reply.statusCode(), reply.body());
    }

    private static HttpResponse get(ServerProcess server, String path, boolean withToken) {
        var reply = withToken ? Http.get(server.httpBase() + path, "Authorization", AUTH) : Http.get(server.httpBase() + path);
        return new HttpResponse(reply.statusCode(), reply.body());
    }
}
