package io.lmcache.server.metrics;

import java.util.concurrent.atomic.LongAdder;
import java.util.function.Supplier;

/**
 * The series of the ZeroMQ connection limits (issue 31): connections refused as they are accepted
 * (over {@code --max-connections}, or no descriptor left), accept calls that failed, connections
 * closed for stalling, and the connections open.
 *
 * @param overCap refused: the cap was reached
 * @param noDescriptor refused: drained from the listen backlog because accept found no descriptor
 * @param acceptFailures accept() calls of the listener that failed
 * @param stalled closed: no complete message for the stall timeout
 */
public record ConnectionMetrics(LongAdder overCap, LongAdder noDescriptor, LongAdder acceptFailures, LongAdder stalled) {
    /** Declares the series; {@code open} is read at each scrape. */
    public static ConnectionMetrics declare(ServerMetrics metrics, Supplier<Number> open) {
        String refused = "lmcache_mp.zeromq_connections_refused";
        String refusedHelp = "ZeroMQ connections closed as they were accepted: over --max-connections, or no descriptor left";
        // runs on: lmcache-http-* (each scrape)
        metrics.gauge("lmcache_mp.zeromq_connections_open", "ZeroMQ TCP connections open (the health probe's included)", open);
        return new ConnectionMetrics(metrics.declare(refused, refusedHelp, "reason", "over_cap"),
                metrics.declare(refused, refusedHelp, "reason", "no_descriptor"),
                metrics.declare("lmcache_mp.zeromq_accept_failures", "accept() calls of the ZeroMQ listener that failed"),
                metrics.declare("lmcache_mp.zeromq_connections_closed", "ZeroMQ connections the server closed", "reason", "stalled"));
    }
}
