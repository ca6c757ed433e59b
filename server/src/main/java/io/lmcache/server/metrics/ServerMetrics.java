package io.lmcache.server.metrics;

import io.lmcache.server.logging.LogCounters;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.ProtocolException;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.jvm.JvmGcMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.core.instrument.binder.system.ProcessorMetrics;
import io.micrometer.core.instrument.binder.system.UptimeMetrics;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Supplier;
import java.util.function.ToDoubleFunction;

/**
 * The server's meters, named as LMCache's exporter names them ({@code lmcache_mp_*}; Micrometer
 * adds {@code _total} to counters). Counters are {@link LongAdder}s behind function counters, so a
 * hot path counts without allocating and {@code POST /metrics/reset} can zero them; meters a hot
 * path touches are created once, up front.
 */
public final class ServerMetrics {
    private static final double[] PERCENTILES = {0.5, 0.99, 0.999};

    private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    private final List<LongAdder> resettable = new ArrayList<>();
    private final List<Runnable> resetHooks = new ArrayList<>();
    private final Map<String, LongAdder> dynamic = new ConcurrentHashMap<>();
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
    private final LongAdder lookupRequestedTokens;
    private final LongAdder lookupHitTokens;
    private final LongAdder[] lookupSplit = new LongAdder[4];
    private final LongAdder storeBytes;
    private final LongAdder retrieveBytes;
    private final LongAdder storeNanos;
    private final LongAdder retrieveNanos;

    public ServerMetrics() {
        new JvmMemoryMetrics().bindTo(registry);
        new JvmGcMetrics().bindTo(registry);
        new JvmThreadMetrics().bindTo(registry);
        new ProcessorMetrics().bindTo(registry);
        new UptimeMetrics().bindTo(registry);
        for (Op op : Op.values()) {
            requests.put(op, counter("lmcache_mp.requests", "requests received, by operation", "op", op.wireName()));
            handlerErrors.put(op, counter("lmcache_mp.handler_errors", "handlers that threw; the client still got the failure value",
                    "op", op.wireName()));
            unsupportedOps.put(op, counter("lmcache_mp.unsupported_ops", "requests for features this server does not provide (no reply)",
                    "op", op.wireName()));
            AtomicReference<Timer> timer = new AtomicReference<>(newTimer(op));
            latency.put(op, timer);
        }
        // runs on: lmcache-http-* (the /metrics/reset request)
        resetHooks.add(() -> {
            for (Op op : Op.values()) {
                Timer old = latency.get(op).get();
                registry.remove(old);
                latency.get(op).set(newTimer(op));
            }
        });
        for (ProtocolException.Reason reason : ProtocolException.Reason.values()) {
            badRequests.put(reason, counter("lmcache_mp.bad_requests", "requests that could not be decoded", "reason", reason.label()));
        }
        unknownOps = counter("lmcache_mp.unknown_ops", "requests whose op is not in the table (no reply)");
        shortMessages = counter("lmcache_mp.bad_requests", "requests that could not be decoded", "reason", "fewer_than_3_frames");
        oversizedEnvelopes = counter("lmcache_mp.bad_requests", "requests that could not be decoded", "reason", "oversized_envelope");
        ignoredFrames = counter("lmcache_mp.ignored_frames", "payload frames beyond what the operation takes (ignored)");
        lookupRequestedTokens = counter("lmcache_mp.lookup_requested_tokens", "tokens asked for by LOOKUP (whole chunks)");
        lookupHitTokens = counter("lmcache_mp.lookup_hit_tokens", "tokens found by LOOKUP (leading whole chunks on every kv rank)");
        lookupSplit[0] = counter("lmcache_mp.lookup_hit_l1", "tokens of LOOKUP hits found in L1");
        lookupSplit[1] = counter("lmcache_mp.lookup_hit_l2", "tokens of LOOKUP hits loaded from L2");
        lookupSplit[2] = counter("lmcache_mp.lookup_hit_l1_keys", "objects of LOOKUP hits found in L1 (one per chunk, kv rank and object group)");
        lookupSplit[3] = counter("lmcache_mp.lookup_hit_l2_keys", "objects of LOOKUP hits loaded from L2");
        storeBytes = counter("lmcache_mp.store_bytes", "bytes copied into L1 by STORE");
        retrieveBytes = counter("lmcache_mp.retrieve_bytes", "bytes copied out of L1 by RETRIEVE");
        storeNanos = counter("lmcache_mp.store_copy_nanoseconds", "time spent copying for STORE");
        retrieveNanos = counter("lmcache_mp.retrieve_copy_nanoseconds", "time spent copying for RETRIEVE");
        functionCounter("lmcache_mp.log_lines", "lines written to the log, by level", LogCounters.warnings(), LongAdder::sum, "level", "warn");
        functionCounter("lmcache_mp.log_lines", "lines written to the log, by level", LogCounters.errors(), LongAdder::sum, "level", "error");
        functionCounter("lmcache_mp.log_suppressed_lines", "log lines a rate limit held back", LogCounters.suppressed(), LongAdder::sum);
        resetHooks.add(LogCounters::reset);
    }

    private Timer newTimer(Op op) {
        return Timer.builder("lmcache_mp.request_latency").description("time from receiving a request to queueing its reply")
                .tag("op", op.wireName()).publishPercentiles(PERCENTILES)
                .minimumExpectedValue(Duration.ofNanos(5_000)).maximumExpectedValue(Duration.ofSeconds(30)).register(registry);
    }

    /** A counter backed by a LongAdder (zeroed by {@link #reset}). */
    public LongAdder counter(String name, String description, String... tags) {
        LongAdder adder = new LongAdder();
        FunctionCounter.builder(name, adder, LongAdder::sum).description(description).tags(tags).register(registry);
        synchronized (resettable) {
            resettable.add(adder);
        }
        return adder;
    }

    /** A counter over a value someone else keeps; {@code reset} zeroes it there. */
    public <T> void functionCounter(String name, String description, T source, ToDoubleFunction<T> value, String... tags) {
        FunctionCounter.builder(name, source, value).description(description).tags(tags).register(registry);
    }

    public void gauge(String name, String description, Supplier<Number> value, String... tags) {
        Gauge.builder(name, value).description(description).tags(Tags.of(tags)).register(registry);
    }

    /** Something else to zero on {@code POST /metrics/reset}. */
    public void onReset(Runnable hook) {
        synchronized (resetHooks) {
            resetHooks.add(hook);
        }
    }

    /** A counter for a rare event (failures): looked up by name and tags, created on first use. */
    public void increment(String name, String description, String... tags) {
        declare(name, description, tags).increment();
    }

    /** Creates such a counter at zero now, so dashboards see the series before the first event. */
    public LongAdder declare(String name, String description, String... tags) {
        String key = name + Tags.of(tags);
        return dynamic.computeIfAbsent(key, k -> counter(name, description, tags));
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

    /** A QUICK request answered on the socket thread. */
    /** Creates the inline counter of an op the op table may run on the socket thread (a QUICK op); start-up only. */
    public void countInline(Op op) {
        inlineRequests.computeIfAbsent(op, o -> counter("lmcache_mp.requests_inline",
                "lookup-family requests answered on the socket thread (the others of their op went to the CPU pool)", "op", o.wireName()));
    }

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

    public void badRequest(ProtocolException.Reason reason) {
        badRequests.get(reason).increment();
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

    public void lookup(long requestedTokens, long hitTokens) {
        lookupRequestedTokens.add(requestedTokens);
        lookupHitTokens.add(hitTokens);
    }

    /** A LOOKUP's hits by tier: tokens of chunks hit in L1 and of those loaded from L2, and the objects (keys) of each. */
    public void lookupSplit(long l1Tokens, long l2Tokens, long l1Keys, long l2Keys) {
        lookupSplit[0].add(l1Tokens);
        lookupSplit[1].add(l2Tokens);
        lookupSplit[2].add(l1Keys);
        lookupSplit[3].add(l2Keys);
    }

    public void stored(long bytes, long nanos) {
        storeBytes.add(bytes);
        storeNanos.add(nanos);
    }

    public void retrieved(long bytes, long nanos) {
        retrieveBytes.add(bytes);
        retrieveNanos.add(nanos);
    }

    public long storeBytes() {
        return storeBytes.sum();
    }

    public long retrieveBytes() {
        return retrieveBytes.sum();
    }

    public long lookupRequestedTokens() {
        return lookupRequestedTokens.sum();
    }

    public long lookupHitTokens() {
        return lookupHitTokens.sum();
    }

    public long requests(Op op) {
        return requests.get(op).sum();
    }

    /** Zeroes every counter and histogram ({@code POST /metrics/reset}); gauges keep showing the present. */
    public void reset() {
        synchronized (resettable) {
            resettable.forEach(LongAdder::reset);
        }
        synchronized (resetHooks) {
            resetHooks.forEach(Runnable::run);
        }
    }

    public double count(String name, String tagKey, String tagValue) {
        FunctionCounter counter = registry.find(name).tag(tagKey, tagValue).functionCounter();
        return counter == null ? 0 : counter.count();
    }
}
