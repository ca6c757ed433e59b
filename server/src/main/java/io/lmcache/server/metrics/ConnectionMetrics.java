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
        // runs on: lmcache-http-* (each scrape)
        metrics.gauge(ZeromqCatalogue.CONNECTIONS_OPEN, open);
        return new ConnectionMetrics(metrics.declare(ZeromqCatalogue.CONNECTIONS_REFUSED, "over_cap"),
                metrics.declare(ZeromqCatalogue.CONNECTIONS_REFUSED, "no_descriptor"), metrics.declare(ZeromqCatalogue.ACCEPT_FAILURES),
                metrics.declare(ZeromqCatalogue.CONNECTIONS_CLOSED, "stalled"));
    }
}
