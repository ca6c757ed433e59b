package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.protocol.testing.Golden;
import io.lmcache.server.testing.PythonClient;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * The long-doc-qa replayer (bench/ldqa) at CI size: the invariants of the benchmarking ladder.
 * C (GPU prefix caching only) finds ~nothing once the GPU pool is saturated; D (with the server)
 * finds every cacheable token on the second pass when the working set fits the server's pool,
 * byte-exact; when it does not fit, the hit rate drops and the server evicts. Assertions read the
 * replayer's JSON, not its text.
 */
@ExtendWith(ServerLogOnFailure.class)
class LdqaReplayIT {
    // tile order: a document comes back only after every other one, so a GPU pool smaller than
    // the working set has evicted it by then
    private static final List<String> WORKLOAD = List.of("--ldqa-document-length", "2048", "--ldqa-query-per-document", "2",
            "--ldqa-num-inflight-requests", "4", "--ldqa-shuffle-policy", "tile", "--ldqa-output-length", "4",
            "--gpu-pool-blocks", "256", "--runs", "2");

    @TempDir
    Path out;

    @Test
    void modeCWithTheGpuPoolSaturatedHitsNothing() throws IOException {
        JsonNode doc = replay(null, "--mode", "C", "--model", "tiny", "--kv-cache-volume", "0.02");
        assertTrue(doc.get("operating_point").get("overflows_gpu").asBoolean());
        for (JsonNode row : rows(doc, "C", "benchmark")) {
            assertTrue(row.get("gpu_hit_rate").asDouble() < 0.02, row.toString());
            assertEquals(0.0, row.get("external_hit_rate").asDouble(), row.toString());
        }
    }

    @Test
    void modeDSecondPassHitsEveryCacheableTokenWhenTheWorkingSetFits() throws IOException {
        try (ServerProcess server = ServerProcess.start("--l1-size-gb", "0.25")) {
            JsonNode doc = replay(server, "--mode", "D", "--model", "tiny", "--kv-cache-volume", "0.02", "--verify");
            assertTrue(doc.get("operating_point").get("fits_server").asBoolean(), doc.get("operating_point").toString());
            JsonNode measured = last(rows(doc, "D", "benchmark"));
            double hit = measured.get("hit_rate_of_cacheable").asDouble();
            assertTrue(hit >= 0.99, measured.toString());
            assertTrue(measured.get("external_hit_tokens").asLong() > 0, measured.toString());
            assertEquals(0, measured.get("retrieves_failed").asInt(), measured.toString());
            assertByteExact(doc);
            assertEquals(0.0, measured.get("server_evictions").asDouble(), measured.toString());
        }
    }

    @Test
    void aWorkingSetThatDoesNotFitHitsLessAndEvicts() throws IOException {
        try (ServerProcess server = ServerProcess.start("--l1-size-gb", "0.1")) {
            JsonNode doc = replay(server, "--mode", "D", "--model", "tiny", "--layers", "8", "--kv-cache-volume", "0.2", "--verify");
            assertFalse(doc.get("operating_point").get("fits_server").asBoolean(), doc.get("operating_point").toString());
            JsonNode measured = last(rows(doc, "D", "benchmark"));
            assertTrue(measured.get("hit_rate_of_cacheable").asDouble() < 0.9, measured.toString());
            double evictions = 0;
            for (JsonNode row : rows(doc, "D", null)) {
                evictions += row.get("server_evictions").asDouble();
            }
            assertTrue(evictions > 0, "no server evictions: " + doc.get("rows"));
            // tile order over an LRU pool too small for it: a cyclic scan, where LRU keeps nothing
            // that comes back soon; what is retrieved must still be exact
            for (JsonNode row : doc.get("rows")) {
                assertEquals(0, row.get("verify_mismatches").asLong(), row.toString());
            }
        }
    }

    @Test
    void slidingWindowHybridRoundTripsOnTheSecondPass() throws IOException {
        try (ServerProcess server = ServerProcess.start("--l1-size-gb", "0.25")) {
            JsonNode doc = replay(server, "--mode", "D", "--model", "tiny-sliding", "--kv-cache-volume", "0.02", "--verify");
            JsonNode measured = last(rows(doc, "D", "benchmark"));
            assertTrue(measured.get("hit_rate_of_cacheable").asDouble() >= 0.99, measured.toString());
            assertByteExact(doc);
        }
    }

    /** DeepSeek-V4-like (issue 48): compressed groups, a sub-chunk window, a float32 indexer and a scratch ring never stored. */
    @Test
    void deepSeekLikeHybridRoundTripsOnTheSecondPass() throws IOException {
        try (ServerProcess server = ServerProcess.start("--l1-size-gb", "0.25")) {
            // blocks of 128 tokens: a pool of 32 holds what tiny's 256 blocks of 16 do, so the server serves the second pass
            JsonNode doc = replay(server, "--mode", "D", "--model", "tiny-deepseek", "--kv-cache-volume", "0.02", "--verify",
                    "--gpu-pool-blocks", "32");
            JsonNode measured = last(rows(doc, "D", "benchmark"));
            assertTrue(measured.get("hit_rate_of_cacheable").asDouble() >= 0.99, measured.toString());
            assertByteExact(doc);
        }
    }

    private JsonNode replay(ServerProcess server, String... args) throws IOException {
        List<String> command = new ArrayList<>(List.of(PythonClient.python().toString(), "-m", "bench.ldqa"));
        command.addAll(WORKLOAD);
        command.addAll(List.of(args));
        command.addAll(List.of("--out", out.toString()));
        if (server != null) {
            command.addAll(List.of("--endpoint", server.endpoint(), "--http", server.httpBase()));
        }
        PythonClient.Result result = inRepoRoot(command);
        System.out.println(result.output());
        assertEquals(0, result.exitCode(), result.output());
        return new ObjectMapper().readTree(Files.readString(out.resolve("ldqa.json")));
    }

    /** {@code -m bench.ldqa} resolves from the repository root: run there, with the test client on the path. */
    private static PythonClient.Result inRepoRoot(List<String> command) {
        List<String> wrapped = List.of("/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", Golden.repoRoot().toString());
        List<String> all = new ArrayList<>(wrapped);
        all.addAll(command);
        return PythonClient.exec(all, 120);
    }

    private static void assertByteExact(JsonNode doc) {
        long verified = 0;
        for (JsonNode row : doc.get("rows")) {
            assertEquals(0, row.get("verify_mismatches").asLong(), row.toString());
            verified += row.get("verified_blocks").asLong();
        }
        assertTrue(verified > 0, "nothing was verified");
    }

    private static List<JsonNode> rows(JsonNode doc, String config, String phase) {
        List<JsonNode> rows = new ArrayList<>();
        for (JsonNode row : doc.get("rows")) {
            if (row.get("config").asText().equals(config) && (phase == null || row.get("phase").asText().equals(phase))) {
                rows.add(row);
            }
        }
        assertFalse(rows.isEmpty(), "no " + config + "/" + phase + " rows");
        return rows;
    }

    private static JsonNode last(List<JsonNode> rows) {
        return rows.get(rows.size() - 1);
    }
}
