package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.l2.testing.RedisNodes;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * An L2 outage costs a few log lines (issue 31, item 5): the server's Redis cluster stopped under it, with no traffic, while
 * Lettuce's reconnect loop runs dozens of attempts; the log's WARN and ERROR lines (lmcache_mp_log_lines_total) stay a handful,
 * the attempts are counted (lmcache_mp_l2_adapter_events_total{event="reconnect_attempts_failed"}) and the nodes listed as
 * unreachable in /status. Before the fix, Lettuce logged each attempt of each link with a stack trace.
 */
@ExtendWith(ServerLogOnFailure.class)
class RedisOutageIT {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** Enough attempts that a line per attempt could not pass unnoticed: 3 masters x 2 connections, about one a second each. */
    private static final int ATTEMPTS = 40;
    /** The first failure of each kind (connect, reconnect per node, ...), a line each; nothing per attempt. */
    private static final int MAX_LINES = 12;

    @Test
    void aStoppedClusterLogsAFewLinesWhileItsReconnectAttemptsAreCounted() throws Exception {
        try (RedisNodes nodes = RedisNodes.cluster(3);
             ServerProcess server = ServerProcess.start("--l1-size-gb", "0.0625", "--l2-adapter", "{\"type\":\"valkey\",\"startup_nodes\":\""
                     + nodes.startupNodes() + "\",\"cluster_mode\":true,\"request_timeout\":1.0,\"connection_timeout\":1.0}")) {
            await("connected").atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(20)).until(() -> adapter(server).path("connected")
                    .asBoolean());
            double before = lines(server);
            for (int i = 0; i < nodes.size(); i++) {
                nodes.kill(i);
            }
            await("Lettuce's reconnect attempts").atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200)).until(() ->
                    Http.metric(server, "lmcache_mp_l2_adapter_events_total", "event", "reconnect_attempts_failed") >= ATTEMPTS);
            double logged = lines(server) - before;
            assertTrue(logged <= MAX_LINES, logged + " WARN/ERROR lines for " + ATTEMPTS + "+ failed reconnect attempts");
            assertEquals(nodes.size(), adapter(server).path("unreachable_nodes").size(), "every master is listed as unreachable: "
                    + adapter(server));
        }
    }

    private static double lines(ServerProcess server) {
        return Http.metric(server, "lmcache_mp_log_lines_total");
    }

    private static JsonNode adapter(ServerProcess server) throws Exception {
        return JSON.readTree(Http.get(server.httpBase() + "/status").body()).path("storage_manager").path("l2_adapters").path(0);
    }
}
