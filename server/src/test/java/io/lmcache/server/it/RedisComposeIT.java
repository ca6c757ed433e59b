package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLMapper;
import io.lmcache.server.config.ConfigLoader;
import io.lmcache.server.config.MemoryLimits;
import io.lmcache.server.l2.redis.RedisSpec;
import io.lmcache.server.protocol.testing.Golden;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * deploy/compose/redis-cluster.yml, checked by parsers (no container engine runs here): three
 * cluster-enabled masters that keep serving while one is down, a one-shot service that creates the
 * cluster from exactly those nodes, and two servers whose flags the server's own config loader
 * accepts, each with the valkey adapter in cluster mode on those nodes and the same key prefix.
 */
class RedisComposeIT {
    private static final Path FILE = Golden.repoRoot().resolve("deploy/compose/redis-cluster.yml");
    private static final List<String> SERVERS = List.of("lmcache-a", "lmcache-b");

    private static JsonNode service(JsonNode compose, String name) {
        return compose.get("services").get(name);
    }

    private static List<String> command(JsonNode service) {
        List<String> args = new ArrayList<>();
        service.get("command").forEach(arg -> args.add(arg.asText()));
        return args;
    }

    @Test
    void threeMastersOneClusterAndTwoServersSharingIt() throws Exception {
        JsonNode compose = new YAMLMapper().readTree(FILE.toFile());
        List<String> nodes = new ArrayList<>();
        for (String name : List.of("redis-1", "redis-2", "redis-3")) {
            JsonNode redis = service(compose, name);
            String command = String.join(" ", command(redis));
            assertTrue(command.contains("--cluster-enabled yes"), name);
            assertTrue(command.contains("--cluster-require-full-coverage no"), name + ": the other masters keep serving while one is down");
            nodes.add(redis.at("/networks/l2/ipv4_address").asText() + ":6379");
        }
        String init = service(compose, "redis-cluster-init").get("command").toString();
        assertTrue(init.contains("--cluster create " + String.join(" ", nodes) + " --cluster-replicas 0 --cluster-yes"), init);

        List<String> hostPorts = new ArrayList<>();
        for (String name : SERVERS) {
            JsonNode server = service(compose, name);
            assertEquals("service_completed_successfully", server.at("/depends_on/redis-cluster-init/condition").asText());
            hostPorts.add(server.get("ports").toString());
            List<String> args = command(server).stream().map(arg -> arg.replace("${LMCACHE_HTTP_ADMIN_TOKEN:-change-me}", "t")).toList();
            ConfigLoader.Outcome outcome = ConfigLoader.load(args.toArray(String[]::new), Map.of(), MemoryLimits.unlimited());
            ConfigLoader.Outcome.Run run = assertInstanceOf(ConfigLoader.Outcome.Run.class, outcome, () -> name + ": " + outcome);
            RedisSpec valkey = assertInstanceOf(RedisSpec.class, run.config().l2().adapters().getFirst());
            assertEquals("valkey", valkey.type());
            assertTrue(valkey.clusterMode());
            assertEquals(nodes, valkey.nodes().stream().map(RedisSpec.Endpoint::toString).toList(), name + " starts from every master");
            assertEquals("fleet1", valkey.keyPrefix(), "the servers share one key space");
        }
        assertNotEquals(hostPorts.get(0), hostPorts.get(1), "each server has its own host ports");
    }
}
