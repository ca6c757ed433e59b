package io.lmcache.server.loop;

import io.lmcache.server.protocol.Op;

/** Where a handler runs (protocol doc §2.5). */
public enum HandlerKind {
    /** Inline on the socket thread: short, and ordered before the peer's next request. */
    SYNC,
    /**
     * Inline on the socket thread when its payload is small and the CPU pool holds no earlier request
     * (so it cannot overtake one, e.g. a LOOKUP overtaking the END_SESSION before it); the CPU pool
     * otherwise. These are map lookups of a few µs, where the hand-off to a pool thread and back
     * (two thread wake-ups) would cost several times the work.
     */
    QUICK,
    /** The CPU pool ({@code --max-cpu-workers}). */
    NORMAL,
    /** The transfer pool ({@code --max-gpu-workers}), FIFO per peer identity. */
    AFFINITY;

    public static HandlerKind of(Op op) {
        return switch (op) {
            // PING only touches the liveness targets: inline, it never waits behind a pool's queue
            case GET_CHUNK_SIZE, NOOP, GET_EXPERIMENTAL, PING, REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT,
                    UNREGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT -> SYNC;
            // REGISTER opens CUDA IPC handles (may block in the driver): on the worker's lane, in order with its transfers
            case REGISTER_KV_CACHE, UNREGISTER_KV_CACHE, STORE, RETRIEVE -> AFFINITY;
            case LOOKUP, QUERY_PREFETCH_STATUS, QUERY_PREFETCH_LOOKUP_HITS, FREE_LOOKUP_LOCKS, END_SESSION -> QUICK;
            default -> NORMAL;
        };
    }
}
