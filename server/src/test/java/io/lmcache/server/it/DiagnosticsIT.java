package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.protocol.DType;
import io.lmcache.server.protocol.TokenHashChain;
import io.lmcache.server.testing.EventsReplay;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ReferenceCoordinator;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TraceFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * The operator diagnostics of issue 49 on a real server: the lookup-hash log's lines for real LOOKUPs (LMCache's fields, the
 * LOOKUP's chunk hashes, salted LOOKUPs left out), and an events trace recorded beside a live coordinator, replayed into a second
 * reference coordinator that then holds what the live one holds.
 */
@ExtendWith(ServerLogOnFailure.class)
class DiagnosticsIT {
    private static final int CHUNK = 256;
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(2, 4 * CHUNK / 16, 16, 2, 64);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Duration WAIT = Duration.ofSeconds(20);

    /** LMCache's blake3 chain over the whole chunks of {@code tokens}, as "0x" hex. */
    private static List<String> chunkHashes(int[] tokens, int chunks) {
        byte[] hashes = new byte[32 * chunks];
        TokenHashChain.blake3().hashChunks(tokens, CHUNK, 0, chunks, hashes);
        List<String> hex = new ArrayList<>();
        for (int c = 0; c < chunks; c++) {
            hex.add("0x" + HexFormat.of().formatHex(hashes, 32 * c, 32 * (c + 1)));
        }
        return hex;
    }

    private static List<JsonNode> lines(Path dir) throws Exception {
        List<JsonNode> lines = new ArrayList<>();
        try (Stream<Path> files = Files.list(dir)) {
            for (Path file : files.filter(p -> p.getFileName().toString().matches("lookup_hashes_\\d{8}_\\d{6}_\\d{6}\\.jsonl")).sorted().toList()) {
                for (String line : Files.readAllLines(file)) {
                    lines.add(JSON.readTree(line));
                }
            }
        }
        return lines;
    }

    @Test
    void eachLookupIsOneLineWithLmcachesFieldsAndItsChunkHashesSaltedOnesLeftOut(@TempDir Path dir) throws Exception {
        Path logs = dir.resolve("hashes");
        try (ServerProcess server = ServerProcess.start(Map.of(), "--lookup-hash-log-dir", logs.toString(), "--chunk-size",
                Integer.toString(CHUNK));
             JavaWorker worker = new JavaWorker(server.endpoint(), 41, "diag/model", GEOMETRY)) {
            worker.register();
            int[] prompt = JavaWorker.tokens(4141, 2 * CHUNK + 100); // two whole chunks and a tail
            int[] blocks = JavaWorker.range(0, 2 * CHUNK / 16);
            worker.fill(blocks, 7);
            assertTrue(worker.store(prompt, 0, 2 * CHUNK, blocks, "store-1"));
            assertEquals(2, worker.lookup(prompt, prompt.length, "lookup-hit", 1, 0));
            int[] other = JavaWorker.tokens(99, 3 * CHUNK);
            assertEquals(0, worker.lookup(other, other.length, "lookup-miss", 1, 0));
            worker.salt("tenant-secret");
            worker.lookup(prompt, prompt.length, "lookup-salted", 1, 0);
            await().atMost(WAIT).until(() -> Http.metric(server, "lmcache_mp_lookup_hash_log_lines_total") == 2
                    && Http.metric(server, "lmcache_mp_lookup_hash_log_salted_skipped_total") == 1);

            List<JsonNode> lines = lines(logs);
            assertEquals(List.of("lookup-hit", "lookup-miss"), lines.stream().map(l -> l.path("request_id").asText()).toList());
            JsonNode hit = lines.getFirst();
            assertEquals(List.of("timestamp", "request_id", "model_name", "chunk_size", "seq_len", "dtypes", "shapes", "chunk_hashes"),
                    iterable(hit.fieldNames()), "LMCache's fields in its order");
            assertEquals("diag/model", hit.path("model_name").asText());
            assertEquals(CHUNK, hit.path("chunk_size").asInt());
            assertEquals(2 * CHUNK + 100, hit.path("seq_len").asInt(), "every token, the tail included");
            assertEquals(chunkHashes(prompt, 2), strings(hit.path("chunk_hashes")), "whole chunks only, the LOOKUP's hashes");
            assertEquals(chunkHashes(other, 3), strings(lines.get(1).path("chunk_hashes")));
            double now = System.currentTimeMillis() / 1000.0;
            assertTrue(hit.path("timestamp").isDouble() && Math.abs(now - hit.path("timestamp").asDouble()) < 600, hit.toString());
            assertEquals(1, hit.path("dtypes").size(), hit.toString());
            DType dtype = DType.fromTorchName(hit.path("dtypes").get(0).asText());
            assertTrue(dtype != null && !hit.path("dtypes").get(0).asText().startsWith("torch."), hit.toString());
            long elements = 1;
            for (JsonNode dim : hit.path("shapes").get(0)) {
                elements *= dim.asLong();
            }
            assertEquals(GEOMETRY.chunkObjectBytes(CHUNK), elements * dtype.elementSize(), "shape x dtype = a chunk's bytes: " + hit);
            assertTrue(Files.readString(Files.list(logs).findFirst().orElseThrow()).indexOf("tenant-secret") < 0, "no salt is written");
        }
    }

    @Test
    void anEventsTraceHoldsTheBatchesTheCoordinatorGotAndItsReplayRebuildsTheSameDirectory(@TempDir Path dir) throws Exception {
        Path trace = dir.resolve("events.lct");
        Set<ReferenceCoordinator.Placement> live;
        List<JsonNode> liveBatches;
        int httpPort;
        try (ReferenceCoordinator coordinator = ReferenceCoordinator.start("127.0.0.2")) {
            try (ServerProcess server = ServerProcess.start(Map.of(), "--coordinator-url", coordinator.url(), "--coordinator-advertise-ip",
                    "127.0.0.1", "--coordinator-event-reporting", "--coordinator-event-flush-interval", "0.1", "--instance-id", "diag-a",
                    "--chunk-size", Integer.toString(CHUNK), "--trace-level", "events", "--trace-output", trace.toString());
                 JavaWorker worker = new JavaWorker(server.endpoint(), 42, "diag/model", GEOMETRY)) {
                httpPort = server.httpPort();
                worker.register();
                int[] blocks = JavaWorker.range(0, 2 * CHUNK / 16);
                worker.fill(blocks, 3);
                assertTrue(worker.store(JavaWorker.tokens(4242, 2 * CHUNK), 0, 2 * CHUNK, blocks, "store-1"));
                await().atMost(WAIT).until(() -> coordinator.placements().size() == 2);
                JsonNode status = JSON.readTree(Http.get(server.httpBase() + "/status").body()).path("events_trace");
                assertEquals(trace.toString(), status.path("path").asText(), status.toString());
                assertTrue(status.path("records").asLong() >= 2, "the start mark and the first batches: " + status);
                server.terminate(Duration.ofSeconds(30)); // SIGTERM: the shutdown closes the trace (its stop mark, below)
            }
            live = coordinator.placements();
            liveBatches = coordinator.admitted();
        }
        TraceFile file = TraceFile.read(trace);
        assertEquals("events", file.header().get("level"));
        assertEquals("diag-a", ((Map<?, ?>) file.header().get("level_meta")).get("instance_id"));
        Map<String, Object> start = TraceFile.args(file.records().getFirst());
        assertEquals("start", start.get("phase"));
        assertEquals((long) httpPort, start.get("http_port"));
        assertEquals("127.0.0.1", start.get("ip"));
        assertEquals(Map.of("phase", "stop", "instance_id", "diag-a"), TraceFile.args(file.records().getLast()), "closed cleanly");
        List<Map<String, Object>> batches = file.args("events.batch");
        assertEquals(liveBatches.size(), batches.size(), "one record per batch the coordinator got");
        List<JsonNode> recorded = new ArrayList<>();
        for (Map<String, Object> batch : batches) {
            recorded.add(JSON.readTree(JSON.writeValueAsString(batch))); // as the coordinator parsed the posted JSON
        }
        assertEquals(liveBatches, recorded, "exactly the posted batches");

        try (ReferenceCoordinator replayed = ReferenceCoordinator.start("127.0.0.3")) {
            EventsReplay.Result result = EventsReplay.replay(file, replayed.url());
            assertEquals(1, result.starts());
            assertEquals(1, result.stops());
            assertEquals(batches.size(), result.batches());
            assertTrue(result.eventStatuses().stream().allMatch(s -> s == 200), result.toString());
            assertEquals(1, replayed.registrations(), "registered at the start mark");
            assertTrue(replayed.instances().isEmpty(), "deregistered at the stop mark");
            assertEquals(live, replayed.placements(), "the same keys, tiers and backends");
            assertEquals(0, replayed.gaps());
            assertEquals(Set.of("l1"), replayed.placements().stream().map(ReferenceCoordinator.Placement::tier).collect(Collectors.toSet()));
        }
    }

    private static List<String> strings(JsonNode array) {
        List<String> out = new ArrayList<>();
        array.forEach(n -> out.add(n.asText()));
        return out;
    }

    private static List<String> iterable(Iterator<String> names) {
        List<String> out = new ArrayList<>();
        names.forEachRemaining(out::add);
        return out;
    }
}
