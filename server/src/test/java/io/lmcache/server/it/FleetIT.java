package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ReferenceCoordinator;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.StreamSupport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The server as a member of an LMCache fleet (issue 49), against the reference coordinator of the test tree: it registers and
 * heartbeats, declares its capacity, streams a STORE as a store event and a removal as a delete event with seq +1 per batch under
 * one incarnation; the coordinator's {@code DELETE /cache/objects} (no token, from its own address) removes the chunk, which a
 * LOOKUP then misses, while the same call from elsewhere needs the admin token; a coordinator restart (all state lost) is
 * answered by a registration and a new capacity declaration, the seq running on.
 */
@ExtendWith(ServerLogOnFailure.class)
class FleetIT {
    private static final int CHUNK = 256;
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(2, 4 * CHUNK / 16, 16, 2, 64);
    private static final String TOKEN = "fleet-admin-token";
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Duration WAIT = Duration.ofSeconds(20);

    private static ServerProcess server(ReferenceCoordinator coordinator, String instanceId) {
        return ServerProcess.start(Map.of(), "--coordinator-url", coordinator.url(), "--coordinator-advertise-ip", "127.0.0.1",
                "--coordinator-heartbeat-interval", "0.2", "--coordinator-event-reporting", "--coordinator-event-flush-interval", "0.1",
                "--instance-id", instanceId, "--http-admin-token", TOKEN, "--chunk-size", Integer.toString(CHUNK));
    }

    @Test
    void registersStreamsEventsObeysTheCoordinatorsDeleteAndSurvivesItsRestart() throws Exception {
        try (ReferenceCoordinator coordinator = ReferenceCoordinator.start("127.0.0.2");
             ServerProcess server = server(coordinator, "fleet-a");
             JavaWorker worker = new JavaWorker(server.endpoint(), 31, "fleet/model", GEOMETRY)) {
            await().atMost(WAIT).until(() -> coordinator.heartbeats() >= 2);
            assertEquals(List.of(new ReferenceCoordinator.Instance("fleet-a", "127.0.0.1", server.httpPort())), coordinator.instances());
            await().atMost(WAIT).until(() -> coordinator.capacities().containsKey("fleet-a/l1/dram"));
            assertEquals(256L << 20, coordinator.capacities().get("fleet-a/l1/dram"), "L1 declared with its configured size");

            worker.register();
            int[] blocks = JavaWorker.range(0, 2 * CHUNK / 16);
            worker.fill(blocks, 3);
            int[] tokens = JavaWorker.tokens(4242, 2 * CHUNK);
            assertTrue(worker.store(tokens, 0, 2 * CHUNK, blocks, "store-1"));
            await().atMost(WAIT).until(() -> l1Keys(coordinator).size() == 2);
            List<JsonNode> keys = l1Keys(coordinator);
            assertEquals("fleet/model", keys.getFirst().path("model_name").asText());
            // a RETRIEVE's reads are access events (tier l1, backend ""), naming the keys the store events named
            assertEquals(2, worker.lookup(tokens, 2 * CHUNK, "lookup-0", 1, 1));
            assertTrue(worker.retrieve(tokens, 0, 2 * CHUNK, JavaWorker.range(2 * CHUNK / 16, 2 * CHUNK / 16), 0, "lookup-0"));
            await().atMost(WAIT).until(() -> accessed(coordinator).size() == 2);
            assertEquals(keys, accessed(coordinator));

            // the same call from the test's own address (not the coordinator's) needs the admin token
            HttpResponse<String> refused = delete(server, keys, null);
            assertEquals(401, refused.statusCode(), refused.body());
            HttpResponse<String> deleted = coordinator.deleteObjects("fleet-a", keys, "l1", false);
            assertEquals(200, deleted.statusCode(), deleted.body());
            JsonNode reply = JSON.readTree(deleted.body());
            assertEquals(2, reply.path("deleted").asInt(), deleted.body());
            assertEquals(0, reply.path("skipped").asInt(), deleted.body());
            assertTrue(reply.path("ok").asBoolean(), deleted.body());
            await().atMost(WAIT).until(() -> l1Keys(coordinator).isEmpty());
            assertEquals(0, worker.lookup(tokens, 2 * CHUNK, "lookup-1", 1, 1), "the chunks are gone: LOOKUP misses");
            HttpResponse<String> withToken = delete(server, keys, TOKEN);
            assertEquals(200, withToken.statusCode(), withToken.body());
            assertEquals(0, JSON.readTree(withToken.body()).path("deleted").asInt(), "nothing left to delete: " + withToken.body());
            HttpResponse<String> l2 = coordinator.deleteObjects("fleet-a", keys, "l2", false);
            assertEquals(503, l2.statusCode(), "no L2 adapter here: LMCache's 503 " + l2.body());

            int before = coordinator.registrations();
            long lastSeq = lastSeq(coordinator);
            coordinator.restart();
            await().atMost(WAIT).until(() -> coordinator.registrations() > before && coordinator.capacities().containsKey("fleet-a/l1/dram"));
            await().atMost(WAIT).until(() -> lastSeq(coordinator) > lastSeq);
            assertSeqRisesByOne(coordinator.admitted());
            assertEquals(1, coordinator.admitted().stream().map(b -> b.path("incarnation").asLong()).distinct().count(), "one incarnation");
            // a post whose reply the restart cut is sent again: a duplicate the gate drops, never a gap
            assertEquals(0, coordinator.gaps(), "no batch was lost");
            long revisions = coordinator.admitted().stream().filter(b -> b.path("event_type").asText().equals("config"))
                    .map(b -> b.path("capacity_revision").asLong()).distinct().count();
            assertTrue(revisions >= 2, "the capacity is declared again after the re-registration");
        }
    }

    @Test
    void twoServersOneCoordinatorTheDirectoryNamesTheHolderItsEvictionReachesOnlyItAndAShutdownDeregisters() throws Exception {
        try (ReferenceCoordinator coordinator = ReferenceCoordinator.start("127.0.0.2");
             ServerProcess a = server(coordinator, "fleet-a");
             JavaWorker worker = new JavaWorker(a.endpoint(), 33, "fleet/model", GEOMETRY)) {
            try (ServerProcess b = server(coordinator, "fleet-b")) {
                await().atMost(WAIT).until(() -> coordinator.instances().size() == 2);
                worker.register();
                int[] blocks = JavaWorker.range(0, CHUNK / 16);
                worker.fill(blocks, 9);
                int[] tokens = JavaWorker.tokens(99, CHUNK);
                assertTrue(worker.store(tokens, 0, CHUNK, blocks, "store-a"));
                await().atMost(WAIT).until(() -> l1Keys(coordinator).size() == 1);
                assertTrue(coordinator.placements().stream().noneMatch(p -> p.instanceId().equals("fleet-b")), "B holds nothing");
                HttpResponse<String> onB = coordinator.deleteObjects("fleet-b", l1Keys(coordinator), "l1", false);
                assertEquals(0, JSON.readTree(onB.body()).path("deleted").asInt(), "B never had the chunk: " + onB.body());
                assertEquals(1, worker.lookup(tokens, CHUNK, "lookup-a", 1, 1), "A still has it");
                worker.freeLookupLocks(tokens, 0, CHUNK, "lookup-a");
                HttpResponse<String> onA = coordinator.deleteObjects("fleet-a", l1Keys(coordinator), "l1", true);
                assertEquals(1, JSON.readTree(onA.body()).path("deleted").asInt(), onA.body());
                await().atMost(WAIT).until(() -> l1Keys(coordinator).isEmpty());
                assertEquals(0, worker.lookup(tokens, CHUNK, "lookup-a2", 1, 1));
            }
            await().atMost(WAIT).until(() -> coordinator.instances().stream().map(ReferenceCoordinator.Instance::id).toList()
                    .equals(List.of("fleet-a")));
        }
    }

    @Test
    void aRejectedBatchIsDroppedCountedAndNamedByTheNextBatchAsASeqGap() throws Exception {
        try (ReferenceCoordinator coordinator = ReferenceCoordinator.start("127.0.0.2");
             ServerProcess server = server(coordinator, "fleet-a");
             JavaWorker worker = new JavaWorker(server.endpoint(), 32, "fleet/model", GEOMETRY)) {
            // two heartbeats after the registration: its capacity declaration (flushed every 0.1 s) is in
            await().atMost(WAIT).until(() -> coordinator.heartbeats() >= 2 && coordinator.capacities().containsKey("fleet-a/l1/dram"));
            worker.register();
            int[] blocks = JavaWorker.range(0, 2 * CHUNK / 16);
            worker.fill(blocks, 5);
            coordinator.failNext("/events", 422, 1);
            assertTrue(worker.store(JavaWorker.tokens(77, CHUNK), 0, CHUNK, JavaWorker.range(0, CHUNK / 16), "store-1"));
            await().atMost(WAIT).until(() -> Http.metric(server, "lmcache_mp_cache_events_events_dropped_total", "reason", "rejected") == 1);
            assertTrue(l1Keys(coordinator).isEmpty(), "the refused store never reached the directory");
            assertTrue(worker.store(JavaWorker.tokens(78, CHUNK), 0, CHUNK, JavaWorker.range(0, CHUNK / 16), "store-2"));
            await().atMost(WAIT).until(() -> l1Keys(coordinator).size() == 1);
            JsonNode last = coordinator.admitted().getLast();
            assertEquals(1, last.path("dropped_events").asLong(), "the loss is carried on: " + last);
            assertEquals(1, coordinator.gaps(), "the refused batch's seq was not reused: the coordinator sees the gap");
        }
    }

    @Test
    void lmcachesAliasesAnswerAsLmcachesAndKeepTheirGuardsWithACoordinatorSet() throws Exception {
        try (ReferenceCoordinator coordinator = ReferenceCoordinator.start("127.0.0.2");
             ServerProcess server = ServerProcess.start(Map.of(), "--coordinator-url", coordinator.url(), "--http-admin-token", TOKEN,
                     "--eviction-policy", "IsolatedLRU")) {
            String base = server.httpBase();
            String auth = "Bearer " + TOKEN;
            assertEquals(401, Http.post(base + "/api/clear-cache", "{}", "Content-Type", "application/json").statusCode());
            HttpResponse<String> cleared = Http.post(base + "/clear-cache", "{}", "Content-Type", "application/json", "Authorization", auth);
            assertEquals(200, cleared.statusCode(), cleared.body());
            assertEquals("ok", JSON.readTree(cleared.body()).path("status").asText());
            assertEquals(200, Http.post(base + "/api/clear-cache", "", "Authorization", auth).statusCode());

            assertEquals(401, quota("PUT", base + "/api/quota/tenant-a", "{\"limit_gb\": 0.5}", null).statusCode(), "a quota needs the token");
            HttpResponse<String> set = quota("PUT", base + "/api/quota/tenant-a", "{\"limit_gb\": 0.5}", TOKEN);
            assertEquals(200, set.statusCode(), set.body());
            assertEquals(JSON.readTree("{\"cache_salt\":\"tenant-a\",\"limit_gb\":0.5,\"status\":\"ok\"}"), JSON.readTree(set.body()));
            JsonNode got = JSON.readTree(quota("GET", base + "/quota/tenant-a", null, TOKEN).body());
            assertEquals(0.5, got.path("limit_gb").asDouble());
            assertTrue(got.path("exists").asBoolean(), got.toString());
            assertEquals(0.0, got.path("current_usage_gb").asDouble());
            assertEquals(0.5, JSON.readTree(quota("GET", base + "/api/quota", null, TOKEN).body()).path("users").path("tenant-a")
                    .path("limit_gb").asDouble());
            assertEquals(400, quota("PUT", base + "/api/quota/tenant-a", "{\"limit_gb\": -1}", TOKEN).statusCode());
            assertEquals("removed", JSON.readTree(quota("DELETE", base + "/api/quota/tenant-a", null, TOKEN).body()).path("status").asText());
            assertEquals("not_found", JSON.readTree(quota("DELETE", base + "/api/quota/tenant-a", null, TOKEN).body()).path("status").asText());
        }
    }

    private static HttpResponse<String> quota(String method, String url, String body, String token) {
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(url)).method(method, body == null
                ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        if (body != null) {
            request.header("Content-Type", "application/json");
        }
        if (token != null) {
            request.header("Authorization", "Bearer " + token);
        }
        return Http.send(request.build());
    }

    /** The seqs the coordinator admitted (a batch admitted again by a restarted coordinator counted once) run 1, 2, 3... */
    private static void assertSeqRisesByOne(List<JsonNode> batches) {
        List<Long> seqs = new ArrayList<>();
        batches.stream().map(b -> b.path("seq").asLong()).distinct().forEach(seqs::add);
        for (int i = 1; i < seqs.size(); i++) {
            assertEquals(seqs.get(i - 1) + 1, seqs.get(i), "seq +1 per batch: " + seqs);
        }
        assertEquals(1L, seqs.getFirst(), "the first batch is seq 1: " + seqs);
    }

    private static long lastSeq(ReferenceCoordinator coordinator) {
        List<JsonNode> admitted = coordinator.admitted();
        return admitted.isEmpty() ? 0 : admitted.getLast().path("seq").asLong();
    }

    private static List<JsonNode> l1Keys(ReferenceCoordinator coordinator) {
        return coordinator.placements().stream().filter(p -> p.tier().equals("l1") && p.instanceId().equals("fleet-a"))
                .map(ReferenceCoordinator.Placement::key).sorted((a, b) -> a.toString().compareTo(b.toString())).toList();
    }

    /** The keys of the access events admitted (tier l1, backend ""), sorted as {@link #l1Keys}. */
    private static List<JsonNode> accessed(ReferenceCoordinator coordinator) {
        return coordinator.admitted().stream().filter(b -> b.path("event_type").asText().equals("access")
                && b.path("tier").asText().equals("l1") && b.path("backend").asText().isEmpty())
                .flatMap(b -> StreamSupport.stream(b.path("entries").spliterator(), false))
                .map(e -> e.path("key")).sorted((a, b) -> a.toString().compareTo(b.toString())).toList();
    }

    private static HttpResponse<String> delete(ServerProcess server, List<JsonNode> keys, String token) throws Exception {
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(server.httpBase() + "/cache/objects"))
                .header("Content-Type", "application/json")
                .method("DELETE", HttpRequest.BodyPublishers.ofString(JSON.writeValueAsString(Map.of("keys", keys, "tier", "l1"))));
        if (token != null) {
            request.header("Authorization", "Bearer " + token);
        }
        return Http.send(request.build());
    }
}
