package io.lmcache.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.config.ConfigLoader;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.testing.ServerProcess;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Pins the composition root's construction and close order (issue 46 step 1): each rule the root's comments state is asserted
 * here by part name, so a refactor of the wiring cannot reorder a close silently. Host mode: the CUDA event poller is off.
 */
class CompositionOrderTest {
    /**
     * The close order of the named parts on a host-only server, first closed first. Since the assembly, the GPU warm-ups
     * close after the transfer modules (they are opened before them: a REGISTER runs the warm-up through the constructor).
     * Since the data modules are parts of their own, the L2 tier closes after the transfer modules (it opens before them, as it
     * did inside the data modules, for the window commit they take): the dispatcher, the loop and housekeeping have stopped
     * by then, so no module commits, flushes or loads through L2 any more, and L2's write-through of the last commits drains
     * while L1 is open.
     */
    private static final List<String> CLOSE_ORDER = List.of("warm-up", "kv-event streams", "request loop (drain)", "Prometheus HTTP",
            "HTTP API", "housekeeping", "dispatcher", "engine-driven transfers", "lmcache-driven transfers", "L2 tier", "GPU warm-ups",
            "GPU transfers in flight", "release thread", "GPU backend", "L1 tier", "rate-limited log summaries");

    private static LmcacheServer server;
    private static List<String> closes;
    private static List<String> opens;

    @BeforeAll
    static void start() throws IOException {
        String shm = "lmcache_test_order_" + ProcessHandle.current().pid();
        // the diagnostics on, so that their parts open too (issue 49)
        Path diagnostics = Files.createTempDirectory("lmcache-order-diag");
        String[] args = {"--host", "127.0.0.1", "--port", Integer.toString(ServerProcess.freePort()), "--http-host", "127.0.0.1",
            "--http-port", Integer.toString(ServerProcess.freePort()), "--prometheus-port", Integer.toString(ServerProcess.freePort()),
            "--l1-size-gb", "0.016", "--device", "host", "--shm-name", shm, "--lookup-hash-log-dir", diagnostics.resolve("hashes").toString(),
            "--trace-level", "events", "--trace-output", diagnostics.resolve("trace.lct").toString()};
        ServerConfig config = ((ConfigLoader.Outcome.Run) ConfigLoader.load(args, Map.of())).config();
        server = assertTimeoutPreemptively(Duration.ofSeconds(60), () -> LmcacheServer.start(config));
        closes = server.closeOrder();
        opens = server.openOrder();
    }

    @AfterAll
    static void stop() {
        if (server != null) {
            server.close();
        }
    }

    private static void closesBefore(String first, String then, String why) {
        int a = closes.indexOf(first);
        int b = closes.indexOf(then);
        assertTrue(a >= 0 && b >= 0, () -> "both parts close: " + first + ", " + then + " in " + closes);
        assertTrue(a < b, () -> first + " closes before " + then + " (" + why + "): " + closes);
    }

    private static void builtBefore(String first, String then, String why) {
        int a = opens.indexOf(first);
        int b = opens.indexOf(then);
        assertTrue(a >= 0 && b >= 0, () -> "both parts are built: " + first + ", " + then + " in " + opens);
        assertTrue(a < b, () -> first + " is built before " + then + " (" + why + "): " + opens);
    }

    @Test
    void theNamedPartsCloseInTodaysOrder() {
        assertEquals(CLOSE_ORDER, closes.stream().filter(CLOSE_ORDER::contains).toList());
    }

    @Test
    void theGpuBackendClosesAfterTheReleaseThreadAndBeforeThePool() {
        closesBefore("release thread", "GPU backend", "a reaped worker's IPC closes need the CUDA contexts");
        closesBefore("GPU backend", "L1 tier", "the pool is unpinned before its memory goes");
        closesBefore("GPU warm-ups", "GPU backend", "a warm-up still running frees its scratch memory first");
    }

    @Test
    void gpuTransfersInFlightDrainAfterTheModulesAndBeforeTheReleaseThread() {
        closesBefore("lmcache-driven transfers", "GPU transfers in flight", "the modules stop issuing copies first");
        closesBefore("engine-driven transfers", "GPU transfers in flight", "the modules stop issuing copies first");
        closesBefore("GPU transfers in flight", "release thread", "the last completions still give back what it frees");
    }

    @Test
    void theDrainComesBeforeHousekeepingAndHousekeepingBeforeTheModules() {
        closesBefore("request loop (drain)", "housekeeping", "in-flight requests are answered while the sweeps still run");
        closesBefore("housekeeping", "lmcache-driven transfers", "the reaper stops before the modules it reaps close");
        closesBefore("housekeeping", "engine-driven transfers", "the sweeps stop before the modules they sweep close");
        closesBefore("housekeeping", "L2 tier", "L2 closes after the loop and housekeeping");
        closesBefore("request loop (drain)", "dispatcher", "the drain answers through the dispatcher's lanes");
        closesBefore("dispatcher", "lmcache-driven transfers", "no handler runs on a closed module");
    }

    @Test
    void kvEventStreamsCloseBeforeTheLoopDrainsAndTheWarmUpFirstOfAll() {
        assertEquals("warm-up", closes.getFirst(), "the warm-up stops before anything it uses");
        closesBefore("kv-event streams", "request loop (drain)", "every stream's final reply still goes out");
        assertEquals("rate-limited log summaries", closes.getLast(), "the summaries are written after every part that logs");
    }

    @Test
    void theDiagnosticsCloseAroundWhatFeedsThem() {
        closesBefore("fleet", "events trace", "the trace records the batches of the fleet's last flush, then its stop mark");
        closesBefore("lookup-hash log", "lmcache-driven transfers", "the writer reads the shapes the modules registered");
        builtBefore("lookup-hash queue", "lookup module", "the lookup module queues each LOOKUP for the log");
    }

    @Test
    void theReaperIsBuiltAfterTheModules() {
        builtBefore("lmcache-driven transfers", "reaper", "the reaper runs over modules that are complete");
        builtBefore("engine-driven transfers", "reaper", "the reaper runs over modules that are complete");
        builtBefore("lookup module", "dispatcher", "the dispatcher serves every module's ops");
        builtBefore("L2 tier", "lmcache-driven transfers", "the window commit the module takes writes through L2");
        builtBefore("kv-event module", "reaper", "a reaped instance's subscription ends");
        builtBefore("reaper", "management", "management reports the reaper's targets");
        builtBefore("L1 tier", "GPU backend", "the backend's closer unpins the pool");
        builtBefore("release thread", "lmcache-driven transfers", "the modules release workers' mappings through it");
        builtBefore("GPU warm-ups", "lmcache-driven transfers", "a REGISTER runs the GPU warm-up");
    }

    @Test
    void everyPartOfTheListOpensOnAHostServerButTheCudaPoller() {
        assertEquals(ServerParts.ALL.stream().map(p -> p.name()).filter(n -> !n.equals("CUDA event poller")).toList(), opens);
    }
}
