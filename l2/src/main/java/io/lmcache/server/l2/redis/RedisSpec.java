package io.lmcache.server.l2.redis;

import io.lmcache.server.l2.L2AdapterSpec;
import java.util.List;

/**
 * {@code resp} (one node) and {@code valkey} (one node, or a cluster with {@code clusterMode}): each key's raw object bytes
 * under {@code [keyPrefix@]model@{kv_rank:08x}@{og:x}@{hash hex}[@salt]} (hybrid-and-l2.md §B.8).
 *
 * @param type {@code resp} or {@code valkey}
 * @param nodes the node (standalone) or the cluster's startup nodes
 * @param keyPrefix "" for none
 * @param databaseId {@code SELECT}ed on a standalone node
 * @param ttlMs 0: keys do not expire
 * @param numWorkers values (SET or GET) in flight at once
 */
public record RedisSpec(String type, List<Endpoint> nodes, boolean clusterMode, String username, String password, String keyPrefix,
        int databaseId, boolean tlsEnable, long requestTimeoutNs, long connectionTimeoutNs, long maxCapacityBytes, long ttlMs,
        int numWorkers, boolean persistEnabled, EvictionSpec eviction, List<String> warnings) implements L2AdapterSpec {
    public RedisSpec {
        nodes = List.copyOf(nodes);
        warnings = List.copyOf(warnings);
    }

    /** The password never reaches a log line through a spec. */
    @Override
    public String toString() {
        return "Redis[type=" + type + ", nodes=" + nodes + ", clusterMode=" + clusterMode + ", username=" + username + ", password="
                + (password.isEmpty() ? "" : "<set>") + ", keyPrefix=" + keyPrefix + ", databaseId=" + databaseId + ", tls=" + tlsEnable
                + ", requestTimeoutNs=" + requestTimeoutNs + ", connectionTimeoutNs=" + connectionTimeoutNs + ", maxCapacityBytes="
                + maxCapacityBytes + ", ttlMs=" + ttlMs + ", numWorkers=" + numWorkers + "]";
    }

    /** One Redis/Valkey node's address. */
    public record Endpoint(String host, int port) {
        @Override
        public String toString() {
            return (host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + port;
        }
    }
}
