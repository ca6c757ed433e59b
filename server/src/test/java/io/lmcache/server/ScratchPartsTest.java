package io.lmcache.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.assembly.Assembly;
import io.lmcache.server.assembly.Part;
import io.lmcache.server.config.ConfigLoader;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.warmup.Warmup;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The warm-up exercises the production wiring by construction (issue 46): its scratch server opens a sub-list of the very
 * parts the server opens ({@link ServerParts#SCRATCH} of {@link ServerParts#ALL}), through the same assembly, and says which.
 */
class ScratchPartsTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    private static ServerConfig config(String... extra) {
        List<String> args = new ArrayList<>(List.of("--host", "127.0.0.1", "--port", Integer.toString(ServerProcess.freePort()),
                "--http-host", "127.0.0.1", "--http-port", Integer.toString(ServerProcess.freePort()), "--l1-size-gb", "0.016", "--device",
                "host", "--shm-name", "lmcache_test_scratch_parts_" + ProcessHandle.current().pid()));
        args.addAll(List.of(extra));
        return ((ConfigLoader.Outcome.Run) ConfigLoader.load(args.toArray(String[]::new), Map.of())).config();
    }

    /**
     * The scratch list's parts in the order the assembly opens them, but the engine-driven module, which the scratch
     * configuration leaves out (its worker is LMCache-driven): what a warm-up's scratch server must have opened.
     */
    private static List<String> scratchOpenOrder() {
        return Assembly.order(ServerParts.SCRATCH).stream().map(Part::name).filter(name -> !name.equals("engine-driven transfers")).toList();
    }

    @Test
    void theScratchListIsTheProductionPartsThemselvesInTheirOrder() {
        assertTrue(ServerParts.SCRATCH.size() >= 10, "the request path's parts: " + ServerParts.SCRATCH);
        assertTrue(ServerParts.SCRATCH.contains(DataParts.ENGINE_DRIVEN), "the list is the server's; the scratch configuration switches parts off");
        List<Part<?>> inAll = ServerParts.ALL.stream().filter(part -> ServerParts.SCRATCH.stream().anyMatch(s -> s == part)).toList();
        assertEquals(ServerParts.SCRATCH.size(), inAll.size(), "every scratch part is one of the production list's objects");
        for (int i = 0; i < inAll.size(); i++) {
            assertSame(inAll.get(i), ServerParts.SCRATCH.get(i), "in the production list's order");
        }
        for (String name : List.of("L1 tier", "lmcache-driven transfers", "lookup module", "lookup state", "kv-event recorder",
                "dispatcher")) {
            assertTrue(scratchOpenOrder().contains(name), name + " is on the request path the warm-up runs");
        }
    }

    @Test
    void aWarmUpOpensTheScratchListOfTheProductionParts() {
        Warmup.Result result = Warmup.run(LmcacheServer.scratchParts(), config("--warmup-iterations", "3", "--warmup-budget-ms", "60000"),
                null);
        assertEquals("done", result.stoppedBy(), result.toString());
        assertEquals(scratchOpenOrder(), result.scratchParts());
        List<String> production = ServerParts.ALL.stream().map(Part::name).toList();
        assertTrue(production.containsAll(result.scratchParts()), result.scratchParts() + " within " + production);
    }

    @Test
    void theServersOwnWarmUpOpensThemAndSaysSoInStatus() throws Exception {
        ServerConfig config = config("--warmup-iterations", "3", "--warmup-budget-ms", "60000", "--warmup-background-ms", "0");
        try (LmcacheServer server = LmcacheServer.start(config)) {
            JsonNode warmup = JSON.readTree(Http.get("http://127.0.0.1:" + config.httpPort() + "/status").body()).path("jit_warmup");
            assertEquals("done", warmup.path("stopped_by").asText(), warmup.toString());
            List<String> opened = new ArrayList<>();
            warmup.path("scratch_parts").forEach(name -> opened.add(name.asText()));
            assertEquals(scratchOpenOrder(), opened);
        }
    }
}
