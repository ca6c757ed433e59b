package io.lmcache.server.fleet;

import java.util.List;
import java.util.Map;

/**
 * A second consumer of the cache-event stream's stamped batches, beside {@code POST /events}: LMCache's
 * {@code TraceCacheEventSink} ({@code lmcache/v1/mp_coordinator/cache_events.py}), which records each batch exactly as the HTTP
 * sink posts it, with or without a coordinator (fleet-and-operator-api.md §3.3). Called on {@code lmcache-coordinator-events}
 * (and on the closing thread for the last flush), in seq order; an implementation encodes the batches before it returns.
 */
public interface BatchRecorder {
    /** Who emits the stream, as LMCache's {@code start} mark records it: {@code ip} "" when the outbound address is used. */
    record Emitter(String instanceId, long incarnation, String ip, int httpPort, int mqPort) {}

    /** The stream begins (before its first batch). */
    void started(Emitter emitter);

    /** Batches in wire form (each one element of {@code POST /events}' {@code batches}), stamped, in seq order. */
    void recorded(List<Map<String, Object>> batches);
}
