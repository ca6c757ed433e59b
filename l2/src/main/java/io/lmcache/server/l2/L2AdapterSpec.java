package io.lmcache.server.l2;

import java.util.List;

/** One parsed {@code --l2-adapter} JSON object (hybrid-and-l2.md §B.5–§B.8), validated by {@link L2AdapterSpecs}. */
public sealed interface L2AdapterSpec {
    /** The JSON {@code type}. */
    String type();

    /** The adapter's L2 eviction settings (its inner adapter's for a decorator); null: never evicted. */
    EvictionSpec eviction();

    /** Settings that were accepted but have no effect here, for a start-up warning each. */
    List<String> warnings();

    /**
     * The {@code "eviction"} object: LRU by bytes at the watermark, or noop.
     *
     * @param lru false for {@code noop}
     */
    record EvictionSpec(boolean lru, double triggerWatermark, double evictionRatio) {}

    /**
     * {@code fs_native}: one file per key under {@code basePath}.
     *
     * @param numWorkers threads that write (write-through)
     * @param readWorkers threads that look up and load ({@code read_io_depth}; {@code num_workers} when it is 0), apart from the
     *     writers so a LOOKUP never queues behind the write-through backlog
     */
    record FsNative(String basePath, int numWorkers, int readWorkers, String relativeTmpDir, boolean useOdirect, long maxCapacityBytes,
            boolean persistEnabled, EvictionSpec eviction, List<String> warnings) implements L2AdapterSpec {
        public FsNative {
            warnings = List.copyOf(warnings);
        }

        @Override
        public String type() {
            return "fs_native";
        }
    }

    /**
     * {@code resp} (one node) and {@code valkey} (one node, or a cluster with {@code clusterMode}): each key's raw object bytes
     * under {@code [keyPrefix@]model@rank08x@og_hex@hash_hex[@salt]} (hybrid-and-l2.md §B.8).
     *
     * @param type {@code resp} or {@code valkey}
     * @param nodes the node (standalone) or the cluster's startup nodes
     * @param keyPrefix "" for none
     * @param databaseId {@code SELECT}ed on a standalone node
     * @param ttlMs 0: keys do not expire
     * @param numWorkers values (SET or GET) in flight at once
     */
    record Redis(String type, List<Endpoint> nodes, boolean clusterMode, String username, String password, String keyPrefix,
            int databaseId, boolean tlsEnable, long requestTimeoutNs, long connectionTimeoutNs, long maxCapacityBytes, long ttlMs,
            int numWorkers, boolean persistEnabled, EvictionSpec eviction, List<String> warnings) implements L2AdapterSpec {
        public Redis {
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
    }

    /** One Redis/Valkey node's address. */
    record Endpoint(String host, int port) {
        @Override
        public String toString() {
            return (host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + port;
        }
    }

    /** {@code fault_inject}: drops load results of {@code inner} by {@code rules}. */
    record FaultInject(L2AdapterSpec inner, FaultRules rules) implements L2AdapterSpec {
        @Override
        public String type() {
            return "fault_inject";
        }

        @Override
        public EvictionSpec eviction() {
            return inner.eviction();
        }

        /** Its inner adapter's warnings are its own, logged as that adapter is built. */
        @Override
        public List<String> warnings() {
            return List.of();
        }
    }
}
