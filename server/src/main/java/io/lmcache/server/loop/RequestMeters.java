package io.lmcache.server.loop;

import io.lmcache.server.metrics.RequestCatalogue;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.ProtocolException;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;
import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;

/**
 * The request path's meters ({@link RequestCatalogue}), bound by the dispatcher that counts them: requests by op, the
 * latency histogram, what could not be decoded or answered. Meters a hot path touches are made here, up front; counting
 * allocates nothing.
 */
public final class RequestMeters {
    /**
     * Request latency buckets, receive to reply queued: an inline LOOKUP takes microseconds, a STORE's
     * handler a millisecond, a stuck one seconds. Explicit buckets aggregate across pods (a summary's
     * quantiles do not).
     */
    private static final Duration[] LATENCY_BUCKETS = {Duration.ofNanos(10_000), Duration.ofNanos(25_000), Duration.ofNanos(50_000),
        Duration.ofNanos(100_000), Duration.ofNanos(250_000), Duration.ofNanos(500_000), Duration.ofMillis(1), Duration.ofMillis(5),
        Duration.ofMillis(25), Duration.ofMillis(100), Duration.ofSeconds(1), Duration.ofSeconds(10)};

    private final ServerMetrics metrics;
    private final Map<Op, LongAdder> requests = new EnumMap<>(Op.class);
    private final Map<Op, LongAdder> inlineRequests = new EnumMap<>(Op.class);
    private final Map<Op, LongAdder> handlerErrors = new EnumMap<>(Op.class);
    private final Map<Op, LongAdder> unsupportedOps = new EnumMap<>(Op.class);
    private final Map<Op, AtomicReference<Timer>> latency = new EnumMap<>(Op.class);
    private final Map<ProtocolException.Reason, LongAdder> badRequests = new EnumMap<>(ProtocolException.Reason.class);
    private final LongAdder unknownOps;
    private final LongAdder shortMessages;
    private final LongAdder oversizedEnvelopes;
    private final LongAdder ignoredFrames;

    public RequestMeters(ServerMetrics metrics) {
        this.metrics = metrics;
        for (Op op : Op.values()) {
            requests.put(op, metrics.counter(RequestCatalogue.REQUESTS, op.wireName()));
            handlerErrors.put(op, metrics.counter(RequestCatalogue.HANDLER_ERRORS, op.wireName()));
            unsupportedOps.put(op, metrics.counter(RequestCatalogue.UNSUPPORTED_OPS, op.wireName()));
            latency.put(op, new AtomicReference<>(newTimer(op)));
        }
        // runs on: lmcache-http-* (the /metrics/reset request): a histogram cannot be zeroed, so it is replaced
        metrics.onReset(() -> {
            for (Op op : Op.values()) {
                Timer old = latency.get(op).get();
                metrics.registry().remove(old);
                latency.get(op).set(newTimer(op));
            }
        });
        for (ProtocolException.Reason reason : ProtocolException.Reason.values()) {
            badRequests.put(reason, metrics.counter(RequestCatalogue.BAD_REQUESTS, reason.label()));
        }
        unknownOps = metrics.counter(RequestCatalogue.UNKNOWN_OPS);
        shortMessages = metrics.counter(RequestCatalogue.BAD_REQUESTS, "fewer_than_3_frames");
        oversizedEnvelopes = metrics.counter(RequestCatalogue.BAD_REQUESTS, "oversized_envelope");
        ignoredFrames = metrics.counter(RequestCatalogue.IGNORED_FRAMES);
    }

    private Timer newTimer(Op op) {
        return metrics.timer(RequestCatalogue.REQUEST_LATENCY, op.wireName()).serviceLevelObjectives(LATENCY_BUCKETS)
                .register(metrics.registry());
    }

    public void request(Op op) {
        requests.get(op).increment();
    }

    /** Creates the inline counter of an op the op table may run on the socket thread (a QUICK op); start-up only. */
    public void countInline(Op op) {
        inlineRequests.computeIfAbsent(op, o -> metrics.counter(RequestCatalogue.REQUESTS_INLINE, o.wireName()));
    }

    /** A QUICK request answered on the socket thread. */
    public void inlineRequest(Op op) {
        inlineRequests.get(op).increment();
    }

    public void latency(Op op, long nanos) {
        latency.get(op).get().record(nanos, TimeUnit.NANOSECONDS);
    }

    public void handlerError(Op op) {
        handlerErrors.get(op).increment();
    }

    public void unsupportedOp(Op op) {
        unsupportedOps.get(op).increment();
    }

    /** A request that could not be decoded; one past a wire limit is also counted by its op and field. */
    public void badRequest(Op op, ProtocolException e) {
        badRequests.get(e.reason()).increment();
        if (e.field() != null) {
            // rare, and both labels come from enums: the series is made on first use
            metrics.increment(RequestCatalogue.WIRE_LIMIT_REFUSALS, op.wireName(), e.field().wireName());
        }
    }

    public void unknownOp() {
        unknownOps.increment();
    }

    public void shortMessage() {
        shortMessages.increment();
    }

    public void oversizedEnvelope() {
        oversizedEnvelopes.increment();
    }

    public void ignoredFrames(int count) {
        ignoredFrames.add(count);
    }

    /** Requests of {@code op} received so far (the activity log's rates). */
    public long requests(Op op) {
        return requests.get(op).sum();
    }
}
