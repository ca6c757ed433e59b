package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Specs and logs stay bounded (issue 31, item 6) on the real server: trailing data after an {@code --l2-adapter} object is refused
 * (it silently dropped the second adapter of {@code {fs},{resp}}), echoed values are clipped in error and start-up lines, and a
 * REGISTER of many groups writes a short log line and a bounded {@code /status} entry with the count.
 */
@ExtendWith(ServerLogOnFailure.class)
class LogBoundsIT {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** The longest line any of these may write: a refused start's line quoting clipped values, the start-up line. */
    private static final int MAX_LINE = 4000;
    /** Under Linux's limit on one argument (128 KiB) and Jackson's on a name (50 000). */
    private static final String HUGE = "x".repeat(40_000);

    private static ServerProcess refusedStart(String... args) throws InterruptedException {
        ServerProcess server = ServerProcess.launch(Map.of(), args);
        assertTrue(server.process().waitFor(60, TimeUnit.SECONDS), "the server exits instead of starting");
        server.close();
        assertEquals(2, server.process().exitValue(), server.log());
        return server;
    }

    private static int longestLine(ServerProcess server) {
        return server.log().lines().mapToInt(String::length).max().orElse(0);
    }

    @Test
    void trailingDataAfterAnAdapterObjectIsRefusedWithOneLine() throws Exception {
        ServerProcess server = refusedStart("--l1-size-gb", "0.0625", "--l2-adapter", "{\"type\":\"fs_native\",\"base_path\":\"/tmp/l2-x\"},"
                + "{\"type\":\"resp\",\"host\":\"127.0.0.1\",\"port\":6379}");
        List<String> lines = server.log().strip().lines().toList();
        assertEquals(1, lines.size(), server.log());
        assertTrue(lines.getFirst().startsWith("lmcache-server: error: --l2-adapter #0: trailing data after the JSON object"), lines.getFirst());
    }

    @Test
    void aHugeValueIsClippedInTheErrorLine() throws Exception {
        for (String adapter : List.of("{\"type\":\"" + HUGE + "\"}", "{\"type\":\"fs_native\",\"base_path\":\"/tmp/x\",\"" + HUGE + "\":1}",
                "{\"type\":\"valkey\",\"startup_nodes\":\"" + HUGE + "\"}")) {
            ServerProcess server = refusedStart("--l1-size-gb", "0.0625", "--l2-adapter", adapter);
            List<String> lines = server.log().strip().lines().toList();
            assertEquals(1, lines.size());
            String line = lines.getFirst();
            assertTrue(line.length() < 400, () -> line.length() + " chars: " + line.substring(0, 200));
            assertTrue(line.matches(".*\\.\\.\\.\\(4000[0-9] chars\\).*"), "says how long the value was: " + line);
        }
        ServerProcess flag = refusedStart("--l1-size-gb", "0.0625", "--l2-store-policy", HUGE);
        assertTrue(longestLine(flag) <= 1100, "a flag's error line: " + longestLine(flag) + " chars");
    }

    @Test
    void aManyGroupRegisterLogsAShortLineAndStatusListsABoundedNumberOfGroups() throws Exception {
        int groups = 200;
        try (ServerProcess server = ServerProcess.start("--l1-size-gb", "0.0625", "--instance-id", HUGE);
             JavaWorker worker = new JavaWorker(server.endpoint(), 31, "groups/model", new JavaWorker.Geometry(groups, 8, 16, 1, 64))) {
            worker.register(groups);
            JsonNode layout = JSON.readTree(Http.get(server.httpBase() + "/status").body()).path("cache_context_meta").path("31")
                    .path("kv_cache_layout");
            assertEquals(groups, layout.path("num_kernel_groups").asInt(), layout.toString().substring(0, 300));
            assertEquals(32, layout.path("kernel_groups").size(), "at most 32 listed");
            // groups of one geometry share their object group: listed like the kernel groups, bounded by the same rule
            assertEquals(Math.min(32, layout.path("num_object_groups").asInt()), layout.path("object_groups").size());
            assertTrue(longestLine(server) < MAX_LINE, "the start-up line (a 40 000-character instance id) and the REGISTER line: "
                    + longestLine(server) + " chars");
        }
    }
}
