package io.lmcache.server.l2.redis;

import static io.lmcache.server.l2.SpecFields.bool;
import static io.lmcache.server.l2.SpecFields.integer;
import static io.lmcache.server.l2.SpecFields.number;
import static io.lmcache.server.l2.SpecFields.text;
import static io.lmcache.server.l2.SpecFields.unknownKeys;

import com.fasterxml.jackson.databind.JsonNode;
import io.lmcache.server.l2.L2AdapterSpec;
import io.lmcache.server.l2.L2SpecException;
import io.lmcache.server.l2.SpecFields;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The {@code resp} and {@code valkey} JSON objects (hybrid-and-l2.md §B.8): checked here so that a
 * bad node list, timeout or prefix stops the start with one line, before any connection is tried.
 */
final class RedisSpecs {
    private static final long GIB = 1L << 30;
    private static final long NS_PER_S = 1_000_000_000L;
    /** The valkey docs' defaults: 5 s per request, 10 s to connect; 8 workers (here: values in flight). */
    private static final double REQUEST_TIMEOUT_S = 5.0;
    private static final double CONNECTION_TIMEOUT_S = 10.0;
    private static final int NUM_WORKERS = 8;
    /** request_timeout and connection_timeout are our additions to resp (its native client has fixed ones). */
    private static final Set<String> RESP = Set.of("host", "port", "num_workers", "username", "password", "max_capacity_gb",
            "request_timeout", "connection_timeout");
    private static final Set<String> VALKEY = Set.of("startup_nodes", "host", "port", "cluster_mode", "username", "password", "key_prefix",
            "database_id", "tls_enable", "request_timeout", "connection_timeout", "max_capacity_gb", "ttl_seconds", "num_workers");

    private RedisSpecs() {}

    /** One node; {@code LMCACHE_RESP_HOST}, {@code _PORT}, {@code _USERNAME} and {@code _PASSWORD} override the JSON, as in LMCache. */
    static RedisSpec resp(JsonNode node, Map<String, String> env) throws L2SpecException {
        unknownKeys(node, "resp", SpecFields.GENERIC, RESP);
        SpecFields.noSerde(node);
        String host = env.getOrDefault("LMCACHE_RESP_HOST", text(node, "host", ""));
        if (host.isBlank()) {
            throw new L2SpecException("resp: \"host\" is required (or LMCACHE_RESP_HOST)");
        }
        String portText = env.get("LMCACHE_RESP_PORT");
        int port;
        if (portText != null) {
            port = port("LMCACHE_RESP_PORT", portText);
        } else if (node.has("port")) {
            port = (int) integer(node, "port", 0, 1, 65535);
        } else {
            throw new L2SpecException("resp: \"port\" is required (or LMCACHE_RESP_PORT)");
        }
        String username = env.getOrDefault("LMCACHE_RESP_USERNAME", text(node, "username", ""));
        String password = env.getOrDefault("LMCACHE_RESP_PASSWORD", text(node, "password", ""));
        Common common = common(node, "resp");
        return new RedisSpec("resp", List.of(new RedisSpec.Endpoint(host.strip(), port)), false, username, password, "", 0,
                false, common.requestTimeoutNs, common.connectionTimeoutNs, common.capacityBytes, 0, common.numWorkers, common.persist,
                common.eviction, common.warnings);
    }

    /** One node or a cluster: {@code startup_nodes} ("host:port[,host:port]"), or the {@code host}/{@code port} shortcut. */
    static RedisSpec valkey(JsonNode node) throws L2SpecException {
        unknownKeys(node, "valkey", SpecFields.GENERIC, VALKEY);
        SpecFields.noSerde(node);
        List<RedisSpec.Endpoint> nodes = valkeyNodes(node);
        boolean cluster = bool(node, "cluster_mode", false);
        if (!cluster && nodes.size() > 1) {
            throw new L2SpecException("valkey: several startup_nodes need \"cluster_mode\": true (standalone mode talks to one node)");
        }
        String prefix = text(node, "key_prefix", "");
        if (prefix.indexOf('@') >= 0) {
            throw new L2SpecException("valkey: \"key_prefix\" must not contain '@', got '" + L2SpecException.clip(prefix) + "'");
        }
        int database = (int) integer(node, "database_id", 0, 0, Integer.MAX_VALUE);
        if (cluster && database != 0) {
            throw new L2SpecException("valkey: \"database_id\" applies to a standalone node only (a cluster has database 0)");
        }
        double ttlS = node.has("ttl_seconds") && !node.get("ttl_seconds").isNull() ? number(node, "ttl_seconds", 0, 0.001, 1e9) : 0;
        Common common = common(node, "valkey");
        if (ttlS > 0 && common.capacityBytes > 0) {
            throw new L2SpecException("valkey: \"ttl_seconds\" and \"max_capacity_gb\" do not go together (keys expiring behind the byte"
                    + " count would make it wrong): choose one");
        }
        return new RedisSpec("valkey", nodes, cluster, text(node, "username", ""), text(node, "password", ""), prefix, database,
                bool(node, "tls_enable", false), common.requestTimeoutNs, common.connectionTimeoutNs, common.capacityBytes,
                Math.round(ttlS * 1000), common.numWorkers, common.persist, common.eviction, common.warnings);
    }

    private static List<RedisSpec.Endpoint> valkeyNodes(JsonNode node) throws L2SpecException {
        boolean shortcut = node.has("host") || node.has("port");
        if (node.has("startup_nodes") == shortcut) {
            throw new L2SpecException("valkey: give either \"startup_nodes\" (\"host:port[,host:port]\") or \"host\" and \"port\"");
        }
        if (shortcut) {
            String host = text(node, "host", "");
            if (host.isBlank() || !node.has("port")) {
                throw new L2SpecException("valkey: the shortcut needs both \"host\" and \"port\"");
            }
            return List.of(new RedisSpec.Endpoint(host.strip(), (int) integer(node, "port", 0, 1, 65535)));
        }
        JsonNode value = node.get("startup_nodes");
        List<String> items = new ArrayList<>();
        if (value.isTextual()) {
            items.addAll(List.of(value.asText().split(",")));
        } else if (value.isArray()) {
            for (JsonNode item : value) {
                items.add(item.isTextual() ? item.asText() : "");
            }
        }
        List<RedisSpec.Endpoint> nodes = new ArrayList<>();
        for (String item : items) {
            nodes.add(endpoint(item.strip()));
        }
        if (nodes.isEmpty()) {
            throw new L2SpecException("valkey: \"startup_nodes\" must be \"host:port[,host:port]\", got " + L2SpecException.clip(value));
        }
        return nodes;
    }

    /** {@code host:port} or {@code [v6]:port}. */
    static RedisSpec.Endpoint endpoint(String item) throws L2SpecException {
        int colon = item.lastIndexOf(':');
        String host = colon < 0 ? "" : item.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        if (host.isBlank() || colon == item.length() - 1) {
            throw new L2SpecException("valkey: a startup node must be host:port, got '" + L2SpecException.clip(item) + "'");
        }
        return new RedisSpec.Endpoint(host, port("startup node '" + L2SpecException.clip(item) + "'", item.substring(colon + 1)));
    }

    private static int port(String what, String text) throws L2SpecException {
        try {
            int port = Integer.parseInt(text.strip());
            if (port >= 1 && port <= 65535) {
                return port;
            }
        } catch (NumberFormatException e) {
            // falls through to the one message
        }
        throw new L2SpecException(what + ": the port must be an integer in 1..65535, got '" + L2SpecException.clip(text) + "'");
    }

    /** What resp and valkey share: timeouts, value concurrency, capacity and eviction. */
    private record Common(long requestTimeoutNs, long connectionTimeoutNs, int numWorkers, long capacityBytes, boolean persist,
            L2AdapterSpec.EvictionSpec eviction, List<String> warnings) {}

    private static Common common(JsonNode node, String type) throws L2SpecException {
        double requestS = number(node, "request_timeout", REQUEST_TIMEOUT_S, 0.001, 3600);
        double connectS = number(node, "connection_timeout", CONNECTION_TIMEOUT_S, 0.001, 3600);
        int workers = (int) integer(node, "num_workers", NUM_WORKERS, 1, 256);
        double capacityGb = number(node, "max_capacity_gb", 0, 0, 1 << 30);
        L2AdapterSpec.EvictionSpec eviction = SpecFields.eviction(node.get("eviction"));
        List<String> warnings = new ArrayList<>();
        if (capacityGb > 0 && eviction == null) {
            warnings.add(type + ": max_capacity_gb without an \"eviction\" block only counts bytes; the server's maxmemory bounds the memory");
        }
        if (eviction != null && eviction.lru() && capacityGb == 0) {
            warnings.add(type + ": an \"eviction\" block needs max_capacity_gb > 0 to evict anything");
        }
        return new Common((long) (requestS * NS_PER_S), (long) (connectS * NS_PER_S), workers, (long) (capacityGb * GIB),
                bool(node, "persist_enabled", true), eviction, warnings);
    }
}
