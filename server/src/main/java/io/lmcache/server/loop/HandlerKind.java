package io.lmcache.server.loop;

import io.lmcache.server.protocol.Op;

/** Where a handler runs (protocol doc §2.5). */
public enum HandlerKind {
    /** Inline on the socket thread: short, and ordered before the peer's next request. */
    SYNC,
    /** The CPU pool ({@code --max-cpu-workers}). */
    NORMAL,
    /** The transfer pool ({@code --max-gpu-workers}), FIFO per peer identity. */
    AFFINITY,
    /** PING's own lane, so a heartbeat never waits behind a lookup or a clear. */
    PING;

    public static HandlerKind of(Op op) {
        return switch (op) {
            case REGISTER_KV_CACHE, UNREGISTER_KV_CACHE, GET_CHUNK_SIZE, NOOP, GET_EXPERIMENTAL,
                    REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT, UNREGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT -> SYNC;
            case STORE, RETRIEVE -> AFFINITY;
            case PING -> PING;
            default -> NORMAL;
        };
    }
}
