package io.lmcache.server.l2.redis;

import io.lmcache.server.l2.AdapterUsage;
import io.lmcache.server.l2.L2SpecException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The {@code resp}/{@code valkey} entry of {@code /status}: settings (never the password), whether
 * it is connected, each node's reachability and {@code INFO memory} from the last probe, the byte
 * accounting ({@code current_size_bytes}), and the key and failure counters.
 */
final class RedisStatus {
    /** The adapter's counters at the time of the read. */
    record Counts(int lockedKeys, int valuesInFlight, int valuesWaiting, long storedKeys, long lookupKeys, long lookupHits, long loadedKeys,
            long loadMisses) {}

    private RedisStatus() {}

    static Map<String, Object> of(AdapterUsage usage, RedisSpec spec, RedisLink link, List<NodeProbe.NodeState> nodes, Counts counts,
            FailureLog failures) {
        boolean connected = link.connections() != null;
        // healthy: connected, and every node that holds slots answered the last probe (none yet: not known to be unhealthy)
        boolean nodesUp = nodes.stream().allMatch(node -> node.reachable() || node.node().slots() == 0);
        Map<String, Object> status = new LinkedHashMap<>();
        status.put("is_healthy", connected && nodesUp);
        status.put("type", RedisIo.typeName(spec));
        status.put("adapter", spec.type());
        // a spec may name thousands of nodes, each of any length: the first 16, clipped, and their count
        status.put("startup_nodes", spec.nodes().stream().limit(16).map(node -> L2SpecException.clip(node.toString(), 256)).toList());
        status.put("startup_node_count", spec.nodes().size());
        status.put("cluster_mode", spec.clusterMode());
        status.put("connected", connected);
        status.put("key_prefix", L2SpecException.clip(spec.keyPrefix(), 256));
        status.put("database_id", spec.databaseId());
        status.put("tls_enable", spec.tlsEnable());
        status.put("username", spec.username() == null ? null : L2SpecException.clip(spec.username(), 256));
        status.put("request_timeout_ms", spec.requestTimeoutNs() / 1_000_000);
        status.put("connection_timeout_ms", spec.connectionTimeoutNs() / 1_000_000);
        status.put("ttl_seconds", spec.ttlMs() / 1000.0);
        status.put("num_workers", spec.numWorkers());
        status.put("persist_enabled", spec.persistEnabled());
        status.put("nodes", nodes.stream().map(NodeProbe.NodeState::toStatus).toList());
        if (spec.clusterMode()) {
            Map<String, Object> memory = new LinkedHashMap<>();
            nodes.forEach(node -> memory.put(node.node().address(), node.memory()));
            status.put("node_memory", memory);
        }
        status.put("current_size_bytes", usage.totalBytesUsed());
        status.put("max_capacity_bytes", usage.totalCapacityBytes());
        status.put("used_bytes", usage.totalBytesUsed());
        status.put("usage_fraction", usage.usageFraction());
        status.put("locked_keys", counts.lockedKeys());
        status.put("values_in_flight", counts.valuesInFlight());
        status.put("values_waiting", counts.valuesWaiting());
        status.put("stored_keys", counts.storedKeys());
        status.put("lookup_keys", counts.lookupKeys());
        status.put("lookup_hits", counts.lookupHits());
        status.put("loaded_keys", counts.loadedKeys());
        status.put("load_misses", counts.loadMisses());
        status.put("value_buffers", link.bufferStatus());
        status.put("failures", failures.total());
        status.put("failures_by_reason", failures.byReason());
        status.put("last_error", failures.lastError());
        return status;
    }
}
