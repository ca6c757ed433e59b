package io.lmcache.server.protocol;

import java.util.List;

/** A decoded request: one record per operation this server serves (protocol doc §5). */
public sealed interface Request {

    Op op();

    record GetChunkSize() implements Request {
        public Op op() {
            return Op.GET_CHUNK_SIZE;
        }
    }

    record GetExperimental() implements Request {
        public Op op() {
            return Op.GET_EXPERIMENTAL;
        }
    }

    record Noop() implements Request {
        public Op op() {
            return Op.NOOP;
        }
    }

    /** @param untracked true for the scheduler's probe (instance_id None) */
    record Ping(boolean untracked, long instanceId) implements Request {
        public Op op() {
            return Op.PING;
        }
    }

    record RegisterKvCache(long instanceId, List<TensorWrapper> kvCaches, String modelName, int worldSize, String engineType,
            LayoutHints layoutHints, List<EngineGroupInfo> engineGroups) implements Request {
        public Op op() {
            return Op.REGISTER_KV_CACHE;
        }
    }

    /** REGISTER_LAYERWISE_IPC_EVENT_POOL: the registered instance whose per-layer event pool the worker asks for. */
    record RegisterLayerwiseEventPool(long instanceId) implements Request {
        public Op op() {
            return Op.REGISTER_LAYERWISE_IPC_EVENT_POOL;
        }
    }

    record UnregisterKvCache(long instanceId) implements Request {
        public Op op() {
            return Op.UNREGISTER_KV_CACHE;
        }
    }

    record Lookup(CacheKey key, int tpSize) implements Request {
        public Op op() {
            return Op.LOOKUP;
        }
    }

    record QueryPrefetchStatus(String requestId) implements Request {
        public Op op() {
            return Op.QUERY_PREFETCH_STATUS;
        }
    }

    record WaitPrefetchStatus(String requestId, double timeoutSeconds) implements Request {
        public Op op() {
            return Op.WAIT_PREFETCH_STATUS;
        }
    }

    record QueryPrefetchLookupHits(String requestId) implements Request {
        public Op op() {
            return Op.QUERY_PREFETCH_LOOKUP_HITS;
        }
    }

    record FreeLookupLocks(CacheKey key, int tpSize) implements Request {
        public Op op() {
            return Op.FREE_LOOKUP_LOCKS;
        }
    }

    /** @param endInfo the newer second argument, or null when an older client sent none (or nil) */
    record EndSession(String requestId, SessionEndInfo endInfo) implements Request {
        public Op op() {
            return Op.END_SESSION;
        }

        public boolean hasEndInfo() {
            return endInfo != null;
        }
    }

    /** LMCache's {@code SessionEndInfo}: why the request finished; either field may be absent (null / {@link #NO_STOP_TOKEN}). */
    record SessionEndInfo(String finishReason, long stopTokenId) {
        public static final long NO_STOP_TOKEN = Long.MIN_VALUE;

        public boolean hasStopToken() {
            return stopTokenId != NO_STOP_TOKEN;
        }
    }

    /** {@code poll_kv_events(model_name, cursor, max_events)} (kv-events.md §2). */
    record PollKvEvents(String modelName, long cursor, long maxEvents) implements Request {
        public Op op() {
            return Op.POLL_KV_EVENTS;
        }
    }

    /** {@code subscribe_kv_events(instance_id, model_name, cursor, max_events)}: a streaming op. */
    record SubscribeKvEvents(long instanceId, String modelName, long cursor, long maxEvents) implements Request {
        public Op op() {
            return Op.SUBSCRIBE_KV_EVENTS;
        }
    }

    /** @param blockIds one array of vLLM block ids per LMCache KV group, in token order */
    record Store(CacheKey key, long instanceId, int[][] blockIds, byte[] eventHandle) implements Request {
        public Op op() {
            return Op.STORE;
        }
    }

    record Retrieve(CacheKey key, long instanceId, int[][] blockIds, byte[] eventHandle, int skipFirstNTokens) implements Request {
        public Op op() {
            return Op.RETRIEVE;
        }
    }

    /** RETRIEVE_LAYERWISE: the payloads of a RETRIEVE ({@code protocols/layerwise.py@3ed3c8ba}). */
    record RetrieveLayerwise(Retrieve retrieve) implements Request {
        public Op op() {
            return Op.RETRIEVE_LAYERWISE;
        }
    }

    record ReportBlockAllocation(long instanceId, String modelName, List<BlockAllocationRecord> records) implements Request {
        public Op op() {
            return Op.REPORT_BLOCK_ALLOCATION;
        }
    }

    record Clear(boolean force) implements Request {
        public Op op() {
            return Op.CLEAR;
        }
    }

    record RegisterEngineDrivenContext(EngineDrivenRegistration registration) implements Request {
        public Op op() {
            return Op.REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT;
        }
    }

    record UnregisterEngineDrivenContext(long instanceId) implements Request {
        public Op op() {
            return Op.UNREGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT;
        }
    }

    record PrepareStore(CacheKey key, long instanceId) implements Request {
        public Op op() {
            return Op.PREPARE_STORE;
        }
    }

    /** @param data empty on the shared-memory path; anything else is the (unsupported) pickle path */
    record CommitStore(CacheKey key, long instanceId, byte[] data) implements Request {
        public Op op() {
            return Op.COMMIT_STORE;
        }
    }

    record PrepareRetrieve(CacheKey key, long instanceId) implements Request {
        public Op op() {
            return Op.PREPARE_RETRIEVE;
        }
    }

    record CommitRetrieve(CacheKey key, long instanceId) implements Request {
        public Op op() {
            return Op.COMMIT_RETRIEVE;
        }
    }
}
