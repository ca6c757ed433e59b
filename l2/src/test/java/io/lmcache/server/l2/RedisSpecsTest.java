package io.lmcache.server.l2;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.l2.redis.RedisSpec;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class RedisSpecsTest {
    private static final long S = 1_000_000_000L;

    private static RedisSpec parse(String json) throws L2SpecException {
        return (RedisSpec) L2AdapterSpecs.parse(json, Map.of());
    }

    private static String error(String json) {
        return assertThrows(L2SpecException.class, () -> L2AdapterSpecs.parse(json, Map.of())).getMessage();
    }

    @Test
    void valkeyDefaultsAndEveryKey() throws Exception {
        RedisSpec plain = parse("{\"type\":\"valkey\",\"startup_nodes\":\"10.0.0.1:7000\"}");
        assertEquals(new RedisSpec("valkey", List.of(new RedisSpec.Endpoint("10.0.0.1", 7000)), false, "", "", "", 0, false,
                5 * S, 10 * S, 0, 0, 8, true, null, List.of()), plain);
        RedisSpec full = parse("{\"type\":\"valkey\",\"startup_nodes\":\"a:7000, b:7001,[::1]:7002\",\"cluster_mode\":true,"
                + "\"username\":\"u\",\"password\":\"p\",\"key_prefix\":\"fleet1\",\"tls_enable\":true,\"request_timeout\":0.25,"
                + "\"connection_timeout\":2,\"ttl_seconds\":3600,\"num_workers\":4}");
        assertEquals(List.of(new RedisSpec.Endpoint("a", 7000), new RedisSpec.Endpoint("b", 7001),
                new RedisSpec.Endpoint("::1", 7002)), full.nodes());
        assertEquals("[::1]:7002", full.nodes().get(2).toString());
        assertTrue(full.clusterMode() && full.tlsEnable());
        assertEquals(S / 4, full.requestTimeoutNs());
        assertEquals(2 * S, full.connectionTimeoutNs());
        assertEquals(3_600_000, full.ttlMs());
        assertEquals(4, full.numWorkers());
        assertEquals("fleet1", full.keyPrefix());
        assertFalse(full.toString().contains("\"p\"") || full.toString().contains("password=p"), full.toString());
        RedisSpec shortcut = parse("{\"type\":\"valkey\",\"host\":\"h\",\"port\":6380,\"database_id\":3,\"max_capacity_gb\":2,"
                + "\"eviction\":{}}");
        assertEquals(List.of(new RedisSpec.Endpoint("h", 6380)), shortcut.nodes());
        assertEquals(3, shortcut.databaseId());
        assertEquals(2L << 30, shortcut.maxCapacityBytes());
        assertEquals(new L2AdapterSpec.EvictionSpec(true, 0.8, 0.2), shortcut.eviction());
    }

    @Test
    void respTakesItsEnvironmentOverrides() throws Exception {
        RedisSpec resp = parse("{\"type\":\"resp\",\"host\":\"localhost\",\"port\":6379,\"num_workers\":2,\"password\":\"x\"}");
        assertEquals(List.of(new RedisSpec.Endpoint("localhost", 6379)), resp.nodes());
        assertEquals("resp", resp.type());
        assertEquals(2, resp.numWorkers());
        RedisSpec fromEnv = (RedisSpec) L2AdapterSpecs.parse("{\"type\":\"resp\",\"host\":\"localhost\"}",
                Map.of("LMCACHE_RESP_HOST", "redis.svc", "LMCACHE_RESP_PORT", "7777", "LMCACHE_RESP_USERNAME", "lm",
                        "LMCACHE_RESP_PASSWORD", "secret"));
        assertEquals(List.of(new RedisSpec.Endpoint("redis.svc", 7777)), fromEnv.nodes());
        assertEquals("lm", fromEnv.username());
        assertEquals("secret", fromEnv.password());
        assertEquals("resp: \"port\" is required (or LMCACHE_RESP_PORT)", error("{\"type\":\"resp\",\"host\":\"h\"}"));
        assertEquals("resp: \"host\" is required (or LMCACHE_RESP_HOST)", error("{\"type\":\"resp\",\"port\":1}"));
        assertEquals("resp: unknown key \"cluster_mode\"", error("{\"type\":\"resp\",\"host\":\"h\",\"port\":1,\"cluster_mode\":true}"));
    }

    @Test
    void badValuesAreRefusedWithOneLine() {
        assertEquals("valkey: give either \"startup_nodes\" (\"host:port[,host:port]\") or \"host\" and \"port\"",
                error("{\"type\":\"valkey\"}"));
        assertEquals("valkey: a startup node must be host:port, got 'nohost'", error("{\"type\":\"valkey\",\"startup_nodes\":\"nohost\"}"));
        assertEquals("startup node 'h:99999': the port must be an integer in 1..65535, got '99999'",
                error("{\"type\":\"valkey\",\"startup_nodes\":\"h:99999\"}"));
        assertEquals("valkey: several startup_nodes need \"cluster_mode\": true (standalone mode talks to one node)",
                error("{\"type\":\"valkey\",\"startup_nodes\":\"a:1,b:2\"}"));
        assertEquals("valkey: \"key_prefix\" must not contain '@', got 'a@b'",
                error("{\"type\":\"valkey\",\"startup_nodes\":\"a:1\",\"key_prefix\":\"a@b\"}"));
        assertTrue(error("{\"type\":\"valkey\",\"startup_nodes\":\"a:1\",\"cluster_mode\":true,\"database_id\":2}").contains("standalone"));
        assertTrue(error("{\"type\":\"valkey\",\"startup_nodes\":\"a:1\",\"ttl_seconds\":5,\"max_capacity_gb\":1}").contains("choose one"));
        assertTrue(error("{\"type\":\"valkey\",\"startup_nodes\":\"a:1\",\"request_timeout\":0}").contains("request_timeout"));
        assertEquals("\"serde\" wrappers are not supported by this server", error("{\"type\":\"valkey\",\"host\":\"a\",\"port\":1,"
                + "\"serde\":{\"type\":\"fp8\"}}"));
    }

    @Test
    void passwordsAreRedactedForLogsAndConfig() {
        String redacted = L2AdapterSpecs.redacted("{\"type\":\"fault_inject\",\"inner\":{\"type\":\"resp\",\"host\":\"h\",\"port\":1,"
                + "\"password\":\"hunter2\"}}");
        assertFalse(redacted.contains("hunter2"), redacted);
        assertTrue(redacted.contains("\"password\":\"<set>\""), redacted);
        assertEquals("{\"type\":\"valkey\",\"password\":\"\"}", L2AdapterSpecs.redacted("{\"type\":\"valkey\",\"password\":\"\"}"));
    }
}
