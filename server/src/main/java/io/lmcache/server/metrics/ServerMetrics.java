package io.lmcache.server.metrics;

import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.ProtocolException;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.util.EnumMap;
import java.util.Map;

/**
 * The server's meters, named as LMCache's exporter names them ({@code lmcache_mp_*}; Micrometer adds
 * {@code _total} to counters). Every meter a hot path touches is created here, once, so counting
 * never allocates.
 */
public final class ServerMetrics {
    private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    private final Map<Op, Counter> requests = new EnumMap<>(Op.class);
    private final Map<Op, Counter> handlerErrors = new EnumMap<>(Op.class);
    private final Map<Op, Counter> unsupportedOps = new EnumMap<>(Op.class);
    private final Map<ProtocolException.Reason, Counter> badRequests = new EnumMap<>(ProtocolException.Reason.class);
    private final Counter unknownOps;
    private final Counter shortMessages;
    private final Counter ignoredFrames;
    private final Counter lookupRequestedTokens;
    private final Counter lookupHitTokens;

    public ServerMetrics() {
        for (Op op : Op.values()) {
            requests.put(op, Counter.builder("lmcache_mp.requests").description("requests received, by operation")
                    .tag("op", op.wireName()).register(registry));
            handlerErrors.put(op, Counter.builder("lmcache_mp.handler_errors")
                    .description("handlers that threw; the client still got the failure value").tag("op", op.wireName())
                    .register(registry));
            unsupportedOps.put(op, Counter.builder("lmcache_mp.unsupported_ops")
                    .description("requests for features this server does not provide (no reply)").tag("op", op.wireName())
                    .register(registry));
        }
        for (ProtocolException.Reason reason : ProtocolException.Reason.values()) {
            badRequests.put(reason, Counter.builder("lmcache_mp.bad_requests")
                    .description("requests that could not be decoded").tag("reason", reason.label()).register(registry));
        }
        unknownOps = Counter.builder("lmcache_mp.unknown_ops").description("requests whose op is not in the table (no reply)")
                .register(registry);
        shortMessages = Counter.builder("lmcache_mp.bad_requests").description("requests that could not be decoded")
                .tag("reason", "fewer_than_3_frames").register(registry);
        ignoredFrames = Counter.builder("lmcache_mp.ignored_frames")
                .description("payload frames beyond what the operation takes (ignored)").register(registry);
        lookupRequestedTokens = Counter.builder("lmcache_mp.lookup_requested_tokens")
                .description("tokens asked for by LOOKUP (whole chunks)").register(registry);
        lookupHitTokens = Counter.builder("lmcache_mp.lookup_hit_tokens")
                .description("tokens found by LOOKUP (leading whole chunks on every kv rank)").register(registry);
    }

    public void lookup(long requestedTokens, long hitTokens) {
        lookupRequestedTokens.increment(requestedTokens);
        lookupHitTokens.increment(hitTokens);
    }

    public MeterRegistry registry() {
        return registry;
    }

    public PrometheusMeterRegistry prometheus() {
        return registry;
    }

    public void request(Op op) {
        requests.get(op).increment();
    }

    public void handlerError(Op op) {
        handlerErrors.get(op).increment();
    }

    public void unsupportedOp(Op op) {
        unsupportedOps.get(op).increment();
    }

    public void badRequest(ProtocolException.Reason reason) {
        badRequests.get(reason).increment();
    }

    public void unknownOp() {
        unknownOps.increment();
    }

    public void shortMessage() {
        shortMessages.increment();
    }

    public void ignoredFrames(int count) {
        ignoredFrames.increment(count);
    }

    /** A counter for a rare event (failures): looked up by name and tags, created on first use. */
    public void increment(String name, String description, String... tags) {
        Counter.builder(name).description(description).tags(tags).register(registry).increment();
    }

    public double count(String name, String tagKey, String tagValue) {
        Counter counter = registry.find(name).tag(tagKey, tagValue).counter();
        return counter == null ? 0 : counter.count();
    }
}
