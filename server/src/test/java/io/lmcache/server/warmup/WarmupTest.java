package io.lmcache.server.warmup;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.LmcacheServer;
import io.lmcache.server.config.ConfigLoader;
import io.lmcache.server.config.OperatorSettings;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.logging.LogCounters;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** The start-up JIT warm-up: it runs the request path on its scratch server, within its budget, and leaves nothing behind. */
class WarmupTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** The production parts the server's own warm-ups open. */
    private static final ScratchParts PARTS = LmcacheServer.scratchParts();

    private static ServerConfig config(String... extra) {
        List<String> args = new ArrayList<>(List.of("--host", "127.0.0.1", "--port", Integer.toString(ServerProcess.freePort()),
                "--http-host", "127.0.0.1", "--http-port", Integer.toString(ServerProcess.freePort()), "--l1-size-gb", "0.016", "--device",
                "host", "--shm-name", "lmcache_test_warmup_" + ProcessHandle.current().pid()));
        args.addAll(List.of(extra));
        ConfigLoader.Outcome outcome = ConfigLoader.load(args.toArray(String[]::new), Map.of());
        if (outcome instanceof ConfigLoader.Outcome.Run run) {
            return run.config();
        }
        throw new IllegalArgumentException(outcome.toString());
    }

    private static long scratchSegments() throws IOException {
        String prefix = "lmcache_warmup_" + ProcessHandle.current().pid() + "_";
        try (Stream<Path> files = Files.list(Path.of("/dev/shm"))) {
            return files.filter(path -> path.getFileName().toString().startsWith(prefix)).count();
        }
    }

    @Test
    void everyRoundSucceedsWithoutALogLineAndTheScratchSegmentIsDeleted() throws IOException {
        long warningsBefore = LogCounters.warnings().sum();
        long errorsBefore = LogCounters.errors().sum();
        Warmup.Result result = Warmup.run(PARTS, config("--warmup-iterations", "60", "--warmup-budget-ms", "60000"), null);
        assertEquals("done", result.stoppedBy(), result.toString());
        assertEquals(60, result.rounds());
        assertEquals(60, result.requested());
        assertEquals(30, result.zeromqRounds(), "the second half took the ZeroMQ path, a client's DEALER to a request loop");
        assertEquals(null, result.zeromqSkipped());
        // 30 rounds of 6 requests over loopback TCP, a fresh connection after each 64: the handshake is in the JIT's profiles
        assertEquals(1 + Warmup.REQUESTS_PER_ROUND * 30 / 64, result.loopbackConnections(), result.toString());
        assertEquals(result.loopbackConnections(), result.toMap().get("zeromq_loopback_connections"));
        assertFalse(Thread.getAllStackTraces().keySet().stream().anyMatch(t -> t.isAlive() && t.getName().equals("lmcache-warmup-loop")),
                "the scratch request loop is stopped");
        // a failure path (a refused STORE, a bad frame) would have logged through the server's own rate-limited logs
        assertEquals(warningsBefore, LogCounters.warnings().sum(), "no warning");
        assertEquals(errorsBefore, LogCounters.errors().sum(), "no error");
        assertEquals(0, scratchSegments(), "the scratch worker's segment is gone");
    }

    @Test
    void aDeadServersScratchSegmentIsRemovedAndALiveOnesKept() throws IOException {
        // a pid no process has (above the kernel's pid_max limit of 2^22) and this process's own
        Path dead = Path.of("/dev/shm", "lmcache_warmup_" + ((1L << 22) + 7) + "_0badc0de");
        Path live = Path.of("/dev/shm", "lmcache_warmup_" + ProcessHandle.current().pid() + "_feedface");
        Files.write(dead, new byte[16]);
        Files.write(live, new byte[16]);
        try {
            assertEquals("done", Warmup.run(PARTS, config("--warmup-iterations", "1", "--warmup-budget-ms", "60000"), null).stoppedBy());
            assertFalse(Files.exists(dead), "a dead server's scratch segment is deleted");
            assertTrue(Files.exists(live), "a live server's is kept");
        } finally {
            Files.deleteIfExists(dead);
            Files.deleteIfExists(live);
        }
    }

    @Test
    void theDefaultWarmupIsSkippedBelowFourCoresAndSaysSo() throws IOException {
        assertTrue(Warmup.skippedOnSmallHost(OperatorSettings.DEFAULT_WARMUP_ITERATIONS, 2));
        assertTrue(Warmup.skippedOnSmallHost(OperatorSettings.DEFAULT_WARMUP_ITERATIONS, Warmup.SMALL_HOST_CORES - 1));
        assertFalse(Warmup.skippedOnSmallHost(OperatorSettings.DEFAULT_WARMUP_ITERATIONS, Warmup.SMALL_HOST_CORES));
        assertFalse(Warmup.skippedOnSmallHost(60, 2), "a count the operator gave runs on any host");
        int cores = Runtime.getRuntime().availableProcessors();
        Warmup.Result defaults = Warmup.run(PARTS, config(), null);
        if (cores < Warmup.SMALL_HOST_CORES) {
            assertEquals("small host: " + cores + " cores", defaults.stoppedBy(), defaults.toString());
            assertEquals(0, defaults.rounds());
            assertFalse((Boolean) defaults.toMap().get("ran"));
        } else {
            assertTrue(defaults.rounds() > 0, defaults.toString());
        }
        assertEquals(0, scratchSegments());
    }

    @Test
    void theBudgetEndsTheWarmupAndZeroIterationsTurnItOff() throws IOException {
        Warmup.Result cut = Warmup.run(PARTS, config("--warmup-iterations", "1000000", "--warmup-budget-ms", "1"), null);
        assertEquals("budget", cut.stoppedBy(), cut.toString());
        assertTrue(cut.rounds() < 1_000_000);
        assertEquals(0, scratchSegments());
        assertEquals(Warmup.Result.OFF, Warmup.run(PARTS, config("--warmup-iterations", "0"), null));
        assertFalse((Boolean) Warmup.Result.OFF.toMap().get("ran"));
    }

    @Test
    void aReplyStillOutAtTheDeadlineEndsTheCallAndALateReplyIsSkipped() {
        ServerConfig config = config();
        String[] why = new String[1];
        try (ScratchServer server = ScratchServer.open(PARTS, config, null, why)) {
            assertTrue(server != null, why[0]);
            WarmupFrames frames = new WarmupFrames(ScratchServer.MODEL, ScratchServer.INSTANCE_ID);
            assertTrue(server.connect(config, frames, ScratchServer.Listen.LOOPBACK_TCP, why), why[0]);
            assertTrue(server.loopEndpoint().startsWith("tcp://127.0.0.1:"), server.loopEndpoint());
            assertTrue(server.connect(config, frames, ScratchServer.Listen.IN_PROCESS, why), why[0]);
            assertTrue(server.loopEndpoint().startsWith("inproc://"), "no peer can reach the scratch loop: " + server.loopEndpoint());
            assertEquals(1, server.loopbackConnections(), "the loopback loop's connection, then the in-process one");
            int[] tokens = new int[server.chunkSize];
            long pastNs = System.nanoTime() - 1;
            ScratchServer.NoReply missed = assertThrows(ScratchServer.NoReply.class,
                    () -> server.call(frames.lookup(tokens, tokens.length, "late"), pastNs));
            assertTrue(missed.getMessage().contains("lookup"), missed.getMessage());
            // the late LOOKUP's reply comes first on the socket: skipped by its uid, and this call gets its own
            byte[] payload = server.call(frames.queryPrefetchStatus("late"), System.nanoTime() + TimeUnit.SECONDS.toNanos(30));
            assertTrue(payload != null && payload.length > 0, "the QUERY_PREFETCH_STATUS reply");
            assertEquals(0, server.storedObjects());
        }
    }

    private static JsonNode jitWarmup(ServerConfig config) throws IOException {
        return JSON.readTree(Http.get("http://127.0.0.1:" + config.httpPort() + "/status").body()).path("jit_warmup");
    }

    private static boolean threadAlive(String name) {
        return Thread.getAllStackTraces().keySet().stream().anyMatch(t -> t.isAlive() && t.getName().equals(name));
    }

    @Test
    void theRoundsLeftAtReadyGoOnInTheBackgroundUntilTheFirstRequestPastAClientsStart() throws Exception {
        ServerConfig config = config("--warmup-iterations", "1000000", "--warmup-budget-ms", "100", "--warmup-background-ms", "60000");
        try (LmcacheServer server = LmcacheServer.start(config)) {
            JsonNode started = jitWarmup(config);
            assertEquals("budget", started.path("stopped_by").asText(), started.toString());
            int atReady = started.path("iterations").asInt();
            await().atMost(Duration.ofSeconds(30)).until(() -> jitWarmup(config).path("background").path("zeromq_iterations").asInt() >= 20);
            JsonNode running = jitWarmup(config);
            assertTrue(running.path("background").path("running").asBoolean(), running.toString());
            assertEquals(atReady, running.path("iterations").asInt(), "the start-up's own count stays what ran before ready");
            assertTrue(threadAlive("lmcache-warmup"), "the background rounds' thread");
            try (TestClient client = new TestClient(config.zmqEndpoint())) {
                // a vLLM scheduler's and worker's start (the DEALER's NOOP probe above): the rounds go on beside it
                assertEquals("cd0100", client.call(Op.GET_CHUNK_SIZE.id()).payloadHex());
                assertTrue(client.call(Op.GET_EXPERIMENTAL.id()).payload() != null, "the GET_EXPERIMENTAL reply");
                int afterStart = jitWarmup(config).path("background").path("zeromq_iterations").asInt();
                await().atMost(Duration.ofSeconds(30)).until(() -> jitWarmup(config).path("background").path("zeromq_iterations").asInt()
                        > afterStart);
                assertTrue(jitWarmup(config).path("background").path("running").asBoolean(), "a client's start does not stop the rounds");
                client.call(Op.QUERY_PREFETCH_STATUS.id(), TestClient.pack(p -> p.packString("first-lookup")));
                await().atMost(Duration.ofSeconds(10)).until(() -> !jitWarmup(config).path("background").path("running").asBoolean());
            }
            JsonNode background = jitWarmup(config).path("background");
            assertEquals("first request", background.path("stopped_by").asText(), background.toString());
            assertEquals(60000, background.path("budget_ms").asInt());
            await().atMost(Duration.ofSeconds(10)).until(() -> !threadAlive("lmcache-warmup") && !threadAlive("lmcache-warmup-loop"));
            assertEquals(0, scratchSegments(), "the scratch server is closed: its segment is gone");
            JsonNode status = JSON.readTree(Http.get("http://127.0.0.1:" + config.httpPort() + "/status").body());
            assertEquals(0, status.path("storage_manager").path("l1_manager").path("total_object_count").asInt());
            assertEquals(1, status.path("kv_events").path("next_seq").asLong(), "nothing of the scratch store's reached the real event log");
        }
    }

    @Test
    void theStartUpsLoopbackLoopIsGoneAtReadyAndTheBackgroundGoesInProcess() {
        ServerConfig config = config("--warmup-iterations", "1000000", "--warmup-budget-ms", "2000", "--warmup-background-ms", "60000");
        try (Warmup warmup = Warmup.start(PARTS, config, null)) {
            Warmup.Result startUp = warmup.startUp();
            assertEquals("budget", startUp.stoppedBy(), startUp.toString());
            assertTrue(startUp.zeromqRounds() > 0 && startUp.loopbackConnections() > 0, "the start-up's second half over TCP: " + startUp);
            // issue 45 N11: no port of the warm-up's outlives ready
            assertTrue(warmup.backgroundLoopEndpoint().startsWith("inproc://"), warmup.backgroundLoopEndpoint());
            await().atMost(Duration.ofSeconds(30)).until(() -> ((Number) ((Map<?, ?>) warmup.status().get("background"))
                    .get("zeromq_iterations")).intValue() >= 5);
            assertEquals(startUp.loopbackConnections(), warmup.status().get("zeromq_loopback_connections"));
        }
    }

    @Test
    void theBackgroundRoundsEndAtTheirBudgetAndAtClose() throws Exception {
        ServerConfig budgeted = config("--warmup-iterations", "1000000", "--warmup-budget-ms", "50", "--warmup-background-ms", "300");
        try (LmcacheServer server = LmcacheServer.start(budgeted)) {
            await().atMost(Duration.ofSeconds(10)).until(() -> "budget".equals(jitWarmup(budgeted).path("background").path("stopped_by").asText()));
            assertFalse(jitWarmup(budgeted).path("background").path("running").asBoolean());
        }
        assertEquals(0, scratchSegments());
        ServerConfig closed = config("--warmup-iterations", "1000000", "--warmup-budget-ms", "50", "--warmup-background-ms", "60000");
        LmcacheServer server = LmcacheServer.start(closed);
        try {
            await().atMost(Duration.ofSeconds(10)).until(() -> jitWarmup(closed).path("background").path("iterations").asInt() > 0);
        } finally {
            server.close();
        }
        assertFalse(threadAlive("lmcache-warmup"), "closing the server stops the background rounds and waits for them");
        assertFalse(threadAlive("lmcache-warmup-loop"));
        assertEquals(0, scratchSegments());
    }

    @Test
    void noBackgroundRoundsWhereNoneAreLeftOrItIsOff() throws Exception {
        ServerConfig off = config("--warmup-iterations", "1000000", "--warmup-budget-ms", "50", "--warmup-background-ms", "0");
        try (LmcacheServer server = LmcacheServer.start(off)) {
            JsonNode warmup = jitWarmup(off);
            assertEquals("budget", warmup.path("stopped_by").asText());
            assertTrue(warmup.path("background").isMissingNode(), warmup.toString());
            assertFalse(threadAlive("lmcache-warmup"));
        }
    }

    @Test
    void aServerThatWarmedUpSaysSoAndHasCountedNothing() throws Exception {
        // the background allowed (as on a host of 8 cores or more), though these rounds all end before ready
        ServerConfig config = config("--warmup-iterations", "40", "--warmup-budget-ms", "60000", "--warmup-background-ms", "60000");
        try (LmcacheServer server = LmcacheServer.start(config)) {
            String base = "http://127.0.0.1:" + config.httpPort();
            JsonNode status = JSON.readTree(Http.get(base + "/status").body());
            JsonNode warmup = status.path("jit_warmup");
            assertTrue(warmup.path("ran").asBoolean(), warmup.toString());
            assertEquals(40, warmup.path("iterations").asInt());
            assertEquals(40 * Warmup.REQUESTS_PER_ROUND, warmup.path("requests").asInt());
            // where rounds may go on in the background (in-process), nine tenths of the start-up's take loopback TCP: JeroMQ's
            // TCP engine has no other warm-up (the half-and-half split without a background: everyRoundSucceeds...)
            assertEquals(36, warmup.path("zeromq_iterations").asInt(), "the last nine tenths through the scratch request loop");
            assertEquals("done", warmup.path("stopped_by").asText());
            assertTrue(warmup.path("background").isMissingNode(), "all rounds done before ready: none left for the background");
            // the GPU warm-up runs at a GPU's first REGISTER only: none on a host-only server, and /status says so
            JsonNode gpu = warmup.path("gpu");
            assertEquals(0, gpu.path("budget_ms").asInt(), gpu.toString());
            assertEquals("off", gpu.path("state").asText(), gpu.toString());
            assertEquals(0, gpu.path("count").asInt(), gpu.toString());
            assertEquals(-1, gpu.path("last_ms").asInt(), gpu.toString());
            assertEquals(0, gpu.path("started").asInt(), gpu.toString());
            assertEquals(0, gpu.path("devices").size(), gpu.toString());
            // nothing of the scratch server's requests reached the real store, its event log, its handlers' timers or its metrics
            assertEquals(0, status.path("storage_manager").path("l1_manager").path("total_object_count").asInt());
            assertEquals(1, status.path("kv_events").path("next_seq").asLong(), status.path("kv_events").toString());
            assertEquals(0, status.path("transfer_handler_cpu").path("store").path("requests").asInt(), status.toString());
            assertEquals(0, status.path("registered_gpu_ids").size(), "the scratch worker is not one of the server's");
            String scrape = Http.get(base + "/metrics").body();
            assertEquals(0.0, Http.metric(scrape, "lmcache_mp_requests_total", "op", "store"));
            assertEquals(0.0, Http.metric(scrape, "lmcache_mp_requests_total", "op", "lookup"));
            assertEquals(0.0, Http.metric(scrape, "lmcache_mp_store_bytes_total"));
            assertEquals(0, scratchSegments());
        }
    }
}
