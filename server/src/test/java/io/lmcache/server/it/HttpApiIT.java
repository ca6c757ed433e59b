package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.config.Tuning;
import io.lmcache.server.protocol.testing.Golden;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.Processes;
import io.lmcache.server.testing.PythonClient;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.io.IOException;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/** The HTTP API of the real server: every endpoint, LMCache's field and metric names, admin auth. */
@ExtendWith(ServerLogOnFailure.class)
class HttpApiIT {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(4, 32, 16, 4, 64);

    private static JsonNode json(HttpResponse<String> response) throws IOException {
        assertTrue(response.headers().firstValue("Content-Type").orElse("").startsWith("application/json"), response.headers().toString());
        return JSON.readTree(response.body());
    }

    @Test
    void everyEndpointAnswersWithLmcacheFields() throws Exception {
        try (ServerProcess server = ServerProcess.start();
             JavaWorker worker = new JavaWorker(server.endpoint(), 42, "http/model", GEOMETRY)) {
            worker.register();
            String base = server.httpBase();
            assertEquals("LMCache HTTP API", json(Http.get(base + "/")).get("service").asText());
            HttpResponse<String> health = Http.get(base + "/healthcheck");
            assertEquals(200, health.statusCode());
            assertEquals("healthy", json(health).get("status").asText());

            JsonNode status = json(Http.get(base + "/status"));
            assertTrue(status.get("is_healthy").asBoolean());
            assertEquals("MPCacheServer", status.get("engine_type").asText());
            assertEquals(256, status.get("chunk_size").asInt());
            assertEquals(42, status.get("registered_gpu_ids").get(0).asLong());
            JsonNode context = status.get("cache_context_meta").get("42");
            assertEquals("http/model", context.get("model_name").asText());
            assertEquals(1, context.get("world_size").asInt());
            JsonNode layout = context.get("kv_cache_layout");
            assertEquals(4, layout.get("num_layers").asInt());
            assertEquals(32, layout.get("num_blocks").asInt());
            assertEquals(2 * 4 * 4 * 64 * 2, layout.get("cache_size_per_token").asLong(), "K and V x layers x heads x head size x 2 bytes");
            assertFalse(context.get("connection_closed").asBoolean());
            JsonNode liveness = status.get("worker_liveness");
            for (String field : List.of("enabled", "reap_timeout_seconds", "registration_grace_seconds", "disconnect_grace_seconds",
                    "tracked_instances")) {
                assertTrue(liveness.has(field), "worker_liveness." + field);
            }
            assertEquals(1, liveness.get("tracked_instances").asInt());
            JsonNode storage = status.get("storage_manager");
            assertEquals(2, storage.get("l1_usage").size());
            JsonNode l1 = storage.get("l1_managers").get("default");
            for (String field : List.of("memory_used_bytes", "memory_total_bytes", "memory_usage_ratio", "total_object_count",
                    "write_locked_count", "read_locked_count", "write_ttl_seconds", "read_ttl_seconds")) {
                assertTrue(l1.has(field), "l1_managers.default." + field);
            }
            assertEquals(256L << 20, l1.get("memory_total_bytes").asLong());
            assertTrue(l1.get("pool_preparation").has("progress_ratio"), "pool preparation progress");
            JsonNode eviction = storage.get("eviction");
            assertEquals("LRU", eviction.get("policy").asText());
            assertEquals(0.8, eviction.get("trigger_watermark").asDouble());
            assertEquals(0.2, eviction.get("eviction_ratio").asDouble());

            JsonNode config = json(Http.get(base + "/config"));
            assertEquals(server.port(), config.get("mp").get("port").asInt());
            assertEquals("LRU", config.get("storage_manager").get("eviction_policy").asText());
            assertFalse(Http.get(base + "/config").body().contains("PATH"), "nothing dumps the environment");
            assertTrue(Http.get(base + "/version").body().startsWith("\"0.1.0"), "a bare JSON string, the commit as build metadata");
            JsonNode logLevel = json(Http.get(base + "/loglevel"));
            assertEquals("INFO", logLevel.get("level").asText());
            HttpResponse<String> missing = Http.get(base + "/no/such/path");
            assertEquals(404, missing.statusCode());
            assertEquals("not found", json(missing).get("error").asText());
            assertEquals(404, Http.get(base + "/env").statusCode(), "no /env");
            assertEquals(405, Http.get(base + "/cache/clear").statusCode());

            int[] tokens = JavaWorker.tokens(3, 256);
            worker.fill(JavaWorker.range(0, 16), 3);
            assertTrue(worker.store(tokens, 0, 256, JavaWorker.range(0, 16), "http"));
            JsonNode afterStore = json(Http.get(base + "/status"));
            for (String times : List.of("request_path_cpu", "transfer_handler_cpu")) {
                assertEquals(1, afterStore.get(times).get("store").get("requests").asInt(), times + ": the STORE was timed");
                assertEquals(0, afterStore.get(times).get("retrieve").get("requests").asInt(), times);
            }
            for (String phase : List.of("queue", "decode", "handle", "reply", "send")) {
                assertTrue(afterStore.get("request_path_cpu").get("store").get(phase + "_seconds").asDouble() >= 0, phase);
            }
            // the STORE's reply waited in the reply queue until the socket thread sent it: timed once it went out
            await().atMost(Duration.ofSeconds(5)).until(() -> json(Http.get(base + "/status")).get("request_path_cpu").get("store")
                    .get("send_seconds").asDouble() > 0);
            assertEquals(0.0, afterStore.get("request_path_cpu").get("retrieve").get("send_seconds").asDouble(), "no RETRIEVE was sent");
            // and its timeline: received, reply queued, reply sent, in that order
            JsonNode timeline = json(Http.get(base + "/status")).get("request_path_cpu").get("store").get("recent_timeline_ns");
            assertEquals(1, timeline.size(), "one STORE sent");
            assertTrue(timeline.get(0).get(0).asLong() < timeline.get(0).get(1).asLong()
                    && timeline.get(0).get(1).asLong() <= timeline.get(0).get(2).asLong(), timeline.toString());
            HttpResponse<String> cleared = Http.post(base + "/cache/clear", "{\"tier\": \"l1\"}");
            assertEquals(200, cleared.statusCode());
            assertEquals("ok", json(cleared).get("status").asText());
            assertEquals(1, json(cleared).get("cleared").get("objects").asInt());
            assertEquals(0, worker.lookup(tokens, 256, "after-clear", 1, 0));
            HttpResponse<String> level = Http.post(base + "/loglevel", "{\"level\": \"DEBUG\"}");
            assertEquals("DEBUG", json(level).get("level").asText());
            assertEquals(400, Http.post(base + "/loglevel", "{\"level\": \"LOUD\"}").statusCode());
            assertEquals(400, Http.post(base + "/cache/clear", "not json").statusCode());
        }
    }

    @Test
    void metricsCarryLmcacheNamesAndValuesThroughARealParserAndReset() throws Exception {
        try (ServerProcess server = ServerProcess.start("--instance-id", "http-api-it");
             JavaWorker worker = new JavaWorker(server.endpoint(), 43, "http/model", GEOMETRY)) {
            worker.register();
            int[] blocks = JavaWorker.range(0, 32);
            worker.fill(blocks, 4);
            int[] tokens = JavaWorker.tokens(4, 512);
            assertTrue(worker.store(tokens, 0, 512, blocks, "m"));
            assertEquals(2, worker.lookup(tokens, 512, "m", 1, 1));
            assertTrue(worker.retrieve(tokens, 0, 512, blocks, 0, "m"));
            assertEquals(0, worker.lookup(JavaWorker.tokens(5, 256), 256, "miss", 1, 1));
            Map<String, Double> samples = parseWithPrometheusClient(Http.get(server.httpBase() + "/metrics").body());
            assertEquals(2.0, samples.get("lmcache_mp_l1_write_chunks_total"));
            assertEquals(2.0, samples.get("lmcache_mp_l1_read_chunks_total"));
            assertEquals(768.0, samples.get("lmcache_mp_lookup_requested_tokens_total{cache_salt=,model_name=http/model}"), "512 + 256 tokens asked");
            assertEquals(512.0, samples.get("lmcache_mp_lookup_hit_tokens_total{cache_salt=,model_name=http/model}"), "labelled as LMCache labels it");
            long objectBytes = GEOMETRY.chunkObjectBytes(256);
            assertEquals(2.0 * objectBytes, samples.get("lmcache_mp_l1_memory_usage_bytes"));
            assertEquals(2.0 * objectBytes, samples.get("lmcache_mp_store_bytes_total"));
            assertEquals(1.0, samples.get("lmcache_mp_tracked_instances"));
            assertEquals(1.0, samples.get("lmcache_mp_requests_total{op=store}"));
            // a histogram with fixed buckets from 10 us to 10 s (the parser reports buckets as name_bucket{le=...})
            assertEquals(1.0, samples.get("lmcache_mp_request_latency_seconds_count{op=store}"));
            assertEquals(1.0, samples.get("lmcache_mp_request_latency_seconds_bucket{le=+Inf,op=store}"));
            assertEquals(13, samples.keySet().stream().filter(k -> k.startsWith("lmcache_mp_request_latency_seconds_bucket{") && k.endsWith(
                    ",op=ping}")).count(), "12 buckets and +Inf");
            assertEquals(1.0, samples.get("lmcache_mp_num_submitted_stores_total{device=cpu}"));
            assertEquals(1.0, samples.get("lmcache_mp_num_finished_retrieves_total{device=cpu}"));
            assertEquals(2.0, samples.get("lmcache_mp_num_chunks_loaded_total{cache_salt=,model_name=http/model,worker_id=0}"));
            assertTrue(samples.get("lmcache_mp_store_copy_seconds_total") > 0, "seconds, not nanoseconds");
            assertEquals(1.0, samples.get("target_info{service_instance_id=http-api-it,service_name=lmcache-server,service_version=0.1.0}"));
            assertEquals(200, Http.post(server.httpBase() + "/metrics/reset", "").statusCode());
            Map<String, Double> after = parseWithPrometheusClient(Http.get(server.httpBase() + "/metrics").body());
            assertEquals(0.0, after.get("lmcache_mp_l1_write_chunks_total"));
            assertEquals(0.0, after.get("lmcache_mp_lookup_hit_tokens_total{cache_salt=,model_name=http/model}"));
            assertEquals(0.0, after.get("lmcache_mp_requests_total{op=store}"));
            assertEquals(2.0 * objectBytes, after.get("lmcache_mp_l1_memory_usage_bytes"), "gauges show the present");
        }
    }

    /** Parses with prometheus_client's own text parser; keys are name or name{k=v,...} (labels sorted). */
    static Map<String, Double> parseWithPrometheusClient(String scrape) throws Exception {
        Path input = Files.createTempFile("scrape", ".txt");
        Processes.Result parsed;
        try {
            Files.writeString(input, scrape);
            ProcessBuilder builder = new ProcessBuilder(PythonClient.python().toString(),
                    Golden.repoRoot().resolve("testclient/prom_parse.py").toString()).redirectInput(input.toFile());
            parsed = Processes.run(builder, Duration.ofSeconds(60));
        } finally {
            Files.deleteIfExists(input);
        }
        assertEquals(0, parsed.exitCode(), "prometheus_client parsed the scrape: " + parsed.stderr());
        String out = parsed.stdout();
        Map<String, Double> samples = new HashMap<>();
        for (String line : out.lines().toList()) {
            JsonNode sample = JSON.readTree(line);
            List<String> labels = new ArrayList<>();
            // every series carries the instance label; the keys leave it out (target_info keeps it)
            sample.get("labels").fields().forEachRemaining(e -> {
                if (!e.getKey().equals("service_instance_id") || sample.get("name").asText().equals("target_info")) {
                    labels.add(e.getKey() + "=" + e.getValue().asText());
                }
            });
            labels.sort(null);
            String key = sample.get("name").asText() + (labels.isEmpty() ? "" : "{" + String.join(",", labels) + "}");
            samples.merge(key, sample.get("value").asDouble(), Double::sum);
        }
        return samples;
    }

    @Test
    void theAdminTokenIsRequiredAndEnforcedWhenSet() {
        try (ServerProcess server = ServerProcess.start(Map.of("LMCACHE_HTTP_ADMIN_TOKEN", "s3cret"))) {
            String base = server.httpBase();
            assertEquals(401, Http.post(base + "/cache/clear", "").statusCode());
            assertEquals(401, Http.post(base + "/metrics/reset", "").statusCode());
            assertEquals(401, Http.post(base + "/loglevel", "{\"level\":\"DEBUG\"}").statusCode());
            assertEquals(401, Http.post(base + "/cache/clear", "", "Authorization", "Bearer wrong").statusCode());
            assertEquals(415, Http.post(base + "/cache/clear", "", "Authorization", "Bearer s3cret", "Content-Type", "text/plain")
                    .statusCode(), "a token does not make a non-JSON POST acceptable");
            assertEquals(403, Http.post(base + "/cache/clear", "", "Authorization", "Bearer s3cret", "Origin", "http://evil.example")
                    .statusCode(), "nor a cross-origin one");
            assertEquals(200, Http.post(base + "/cache/clear", "", "Authorization", "Bearer s3cret").statusCode());
            assertEquals(200, Http.post(base + "/metrics/reset", "", "Authorization", "Bearer s3cret").statusCode());
            assertEquals(200, Http.get(base + "/status").statusCode(), "reading needs no token");
            assertEquals(200, Http.get(base + "/metrics").statusCode());
            assertFalse(Http.get(base + "/config").body().contains("s3cret"), "the token is never shown");
        }
    }

    @Test
    void echoedOperatorInputIsClippedInConfigAndStatus(@TempDir Path l2) throws Exception {
        // a spec and an id far longer than any page should carry, as an operator's script might pass them
        String longId = "svc-" + "x".repeat(100_000);
        String spec = "{\"type\":\"fs_native\",\"base_path\":\"" + l2 + "\",\"relative_tmp_dir\":\"" + "t".repeat(200) + "\"}";
        try (ServerProcess server = ServerProcess.start("--service-instance-id", longId, "--l2-adapter", spec)) {
            String config = Http.get(server.httpBase() + "/config").body();
            JsonNode mp = JSON.readTree(config).get("mp");
            assertTrue(mp.get("service_instance_id").asText().endsWith("...(100004 chars)"), mp.get("service_instance_id").asText());
            assertTrue(config.length() < 40_000, "the page is bounded: " + config.length());
            String status = Http.get(server.httpBase() + "/status").body();
            assertFalse(status.contains("x".repeat(1000)), "/status quotes no unclipped operator value");
        }
    }

    @Test
    void configShowsEveryTuningKnobWithItsEffectiveValue() throws Exception {
        // the launcher's LMCACHE_JAVA_OPTS reach the JVM the same way as these
        Map<String, String> env = Map.of("JAVA_TOOL_OPTIONS", "-Dlmcache.cuda.copyBlocks=4 -Dlmcache.l1.prepareThreads=2");
        try (ServerProcess server = ServerProcess.start(env)) {
            JsonNode tuning = json(Http.get(server.httpBase() + "/config")).get("tuning");
            List<String> shown = new ArrayList<>();
            tuning.fieldNames().forEachRemaining(shown::add);
            assertEquals(Tuning.PROPERTIES, shown, "every knob, by its property name");
            assertEquals(4, tuning.get("lmcache.cuda.copyBlocks").asInt(), "a given value");
            assertEquals(2, tuning.get("lmcache.l1.prepareThreads").asInt());
            assertEquals(32, tuning.get("lmcache.cuda.stagingMiB").asInt(), "a default");
            assertTrue(tuning.get("lmcache.cuda.hostFnWake").asBoolean());
            assertEquals(2, json(Http.get(server.httpBase() + "/status")).get("storage_manager").get("l1_manager").get("pool_preparation")
                    .get("threads").asInt(), "the pool's preparation runs with the knob's threads");
        }
    }

    @Test
    void aGetNeverChangesTheLogLevel() throws Exception {
        try (ServerProcess server = ServerProcess.start()) {
            String base = server.httpBase();
            HttpResponse<String> get = Http.get(base + "/loglevel?level=DEBUG");
            assertEquals(405, get.statusCode(), get.body());
            assertTrue(json(get).get("error").asText().contains("POST"), get.body());
            assertEquals(405, Http.get(base + "/loglevel?logger_name=io.lmcache&level=ERROR").statusCode());
            assertEquals("INFO", json(Http.get(base + "/loglevel")).get("level").asText(), "unchanged");
            assertFalse(json(Http.get(base + "/loglevel")).get("loggers").has("io.lmcache"), "no logger got a level");
            HttpResponse<String> post = Http.post(base + "/loglevel", "{\"level\": \"WARNING\", \"logger_name\": \"io.lmcache\"}");
            assertEquals(200, post.statusCode(), post.body());
            assertEquals("WARN", json(post).get("loggers").get("io.lmcache").asText(), "POST sets it");
        }
    }

    @Test
    void loglevelSetsOnlyTheServersOwnLoggers() throws Exception {
        try (ServerProcess server = ServerProcess.start()) {
            String base = server.httpBase();
            for (String name : List.of("attacker.logger.1", "io.lmcachex", "io.lmcache.no.such.Logger", "io.lettuce.core")) {
                HttpResponse<String> post = Http.post(base + "/loglevel", "{\"level\": \"DEBUG\", \"logger_name\": \"" + name + "\"}");
                assertEquals(400, post.statusCode(), name + ": " + post.body());
                assertFalse(json(Http.get(base + "/loglevel")).get("loggers").has(name), name + " got no level");
            }
            assertEquals(200, Http.post(base + "/loglevel", "{\"level\": \"INFO\", \"logger_name\": \"ROOT\"}").statusCode());
            HttpResponse<String> own = Http.post(base + "/loglevel", "{\"level\": \"DEBUG\", \"logger_name\": \"io.lmcache.server\"}");
            assertEquals(200, own.statusCode(), own.body());
            assertEquals("DEBUG", json(own).get("loggers").get("io.lmcache.server").asText());
            // the Redis client and its network layer log only errors (issue 31, item 5): the adapter summarises their failures
            assertEquals("ERROR", json(own).get("loggers").get("io.lettuce").asText());
            assertEquals("ERROR", json(own).get("loggers").get("io.netty").asText());
        }
    }

    @Test
    void mutationsRefuseCrossOriginAndNonJsonPosts() throws Exception {
        try (ServerProcess server = ServerProcess.start()) {
            String base = server.httpBase();
            for (String path : List.of("/cache/clear", "/metrics/reset", "/loglevel")) {
                String body = path.equals("/loglevel") ? "{\"level\": \"DEBUG\"}" : "{}";
                // what a browser page may send without a preflight: a text/plain (or form) body, from its own origin
                assertEquals(415, Http.post(base + path, body, "Content-Type", "text/plain").statusCode(), path);
                assertEquals(415, Http.post(base + path, body, "Content-Type", "application/x-www-form-urlencoded").statusCode(), path);
                assertEquals(403, Http.post(base + path, body, "Origin", "http://evil.example").statusCode(), path);
                assertEquals(403, Http.post(base + path, body, "Origin", "http://127.0.0.1:" + (server.httpPort() + 1)).statusCode(), path);
                assertEquals(403, Http.post(base + path, body, "Origin", "null").statusCode(), path);
            }
            assertEquals("INFO", json(Http.get(base + "/loglevel")).get("level").asText(), "no refused POST took effect");
            assertEquals(6.0, Http.metric(server, "lmcache_mp_http_refused_total", "reason", "not_json"));
            // a bare `curl -X POST` (no Origin, no Content-Type, no body) is no browser's: accepted
            HttpResponse<String> bare = Http.postBare(base + "/cache/clear");
            assertEquals(200, bare.statusCode(), bare.body());
            assertEquals(6.0, Http.metric(server, "lmcache_mp_http_refused_total", "reason", "not_json"));
            assertEquals(9.0, Http.metric(server, "lmcache_mp_http_refused_total", "reason", "cross_origin"));
            // the server's own page (same host and port) and a JSON body with a charset pass
            assertEquals(200, Http.post(base + "/metrics/reset", "{}", "Origin", base).statusCode());
            assertEquals(200, Http.post(base + "/metrics/reset", "{}", "Origin", "http://localhost:" + server.httpPort()).statusCode());
            assertEquals(200, Http.post(base + "/cache/clear", "{}", "Content-Type", "application/json; charset=utf-8").statusCode());
            // /quota shows and sets tenants (secret salts, shares of the pool): with no token configured, nobody, loopback included
            assertEquals(403, Http.get(base + "/quota").statusCode());
            assertEquals(403, Http.post(base + "/quota", "{\"tenant\": \"a\", \"quota_bytes\": 0}").statusCode());
            assertEquals(2.0, Http.metric(server, "lmcache_mp_http_refused_total", "reason", "no_token"));
        }
    }

    @Test
    void headAnswersEveryReadOnlyEndpoint() {
        try (ServerProcess server = ServerProcess.start()) {
            String base = server.httpBase();
            for (String path : List.of("/", "/healthcheck", "/metrics", "/status", "/config", "/version", "/loglevel")) {
                HttpResponse<String> get = Http.get(base + path);
                HttpResponse<String> head = Http.head(base + path);
                assertEquals(get.statusCode(), head.statusCode(), path);
                assertEquals(get.headers().firstValue("Content-Type"), head.headers().firstValue("Content-Type"), path);
                assertEquals("", head.body(), path + ": no body");
            }
            assertEquals(405, Http.head(base + "/cache/clear").statusCode(), "HEAD is a read: a POST-only endpoint refuses it");
            assertEquals(405, Http.post(base + "/status", "{}").statusCode(), "read-only endpoints take no POST");
        }
    }

    @Test
    void withoutATokenANetworkFacingServerKeepsMutationsLocal() throws Exception {
        try (ServerProcess server = ServerProcess.start("--http-host", "0.0.0.0")) {
            // the state the start-up warning describes, as /config shows it
            JsonNode observability = json(Http.get(server.httpBase() + "/config")).get("observability");
            assertEquals("0.0.0.0", observability.get("http_host").asText());
            assertEquals("", observability.get("http_admin_token").asText(), "no admin token");
            assertEquals(200, Http.post(server.httpBase() + "/metrics/reset", "").statusCode(), "loopback clients may");
        }
    }

    @Test
    void healthcheckTurns503WhenTheLoopStops() throws Exception {
        try (ServerProcess server = ServerProcess.start("--test-hooks", "--http-admin-token", "hooks")) {
            String hook = server.httpBase() + "/test/halt-loop";
            assertEquals(200, Http.get(server.httpBase() + "/healthcheck").statusCode());
            // a test hook is a mutating route like the others: POST, same origin, the admin token (issue 31, item 7)
            assertEquals(405, Http.get(hook).statusCode());
            assertEquals(405, Http.head(hook).statusCode());
            assertEquals(401, Http.post(hook, "").statusCode());
            assertEquals(401, Http.postBare(hook).statusCode());
            assertEquals(403, Http.post(hook, "", "Authorization", "Bearer hooks", "Origin", "http://evil.example").statusCode());
            assertEquals(200, Http.get(server.httpBase() + "/healthcheck").statusCode(), "none of those halted the loop");
            assertEquals(3.0, Http.metric(server, "lmcache_mp_http_refused_total"), "the refusals are counted");
            assertEquals(200, Http.post(hook, "", "Authorization", "Bearer hooks").statusCode());
            await().atMost(Duration.ofSeconds(5)).until(() -> Http.get(server.httpBase() + "/healthcheck").statusCode() == 503);
            JsonNode body = json(Http.get(server.httpBase() + "/healthcheck"));
            assertEquals("unhealthy", body.get("status").asText());
            assertTrue(body.get("reason").asText().contains("request loop"), body.toString());
            assertFalse(json(Http.get(server.httpBase() + "/status")).get("is_healthy").asBoolean());
        }
    }

    @Test
    void metricsAlsoOnThePrometheusPort() {
        int prometheusPort = ServerProcess.freePort();
        try (ServerProcess server = ServerProcess.start("--prometheus-port", Integer.toString(prometheusPort));
             TestClient client = new TestClient(server.endpoint())) {
            client.call(22, TestClient.pack(p -> p.packInt(1)));
            String scrape = Http.get("http://127.0.0.1:" + prometheusPort + "/metrics").body();
            assertTrue(Http.metric(scrape, "lmcache_mp_requests_total", "op", "ping") >= 1);
        }
    }
}
