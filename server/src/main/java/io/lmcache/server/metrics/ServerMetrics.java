package io.lmcache.server.metrics;

import io.lmcache.server.config.Versions;
import io.lmcache.server.logging.LogCounters;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.ProtocolException;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.jvm.JvmGcMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.core.instrument.binder.system.ProcessorMetrics;
import io.micrometer.core.instrument.binder.system.UptimeMetrics;
import io.micrometer.core.instrument.config.MeterFilter;
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
 * adds {@code _total} to counters and {@code _seconds} to timers). Counters are {@link LongAdder}s
 * behind function counters, so a hot path counts without allocating and {@code POST /metrics/reset}
 * can zero them; meters a hot path touches are created once, up front. Every series carries
 * {@code service_instance_id} (LMCache's dashboard groups by it), and the scrape ends with
 * {@code target_info} and {@code lmcache_mp_build_info}.
 */
public final class ServerMetrics {
    /**
     * Request latency buckets, receive to reply queued: an inline LOOKUP takes microseconds, a STORE's
     * handler a millisecond, a stuck one seconds. Explicit buckets aggregate across pods (a summary's
     * quantiles do not).
     */
    private static final Duration[] LATENCY_BUCKETS = {Duration.ofNanos(10_000), Duration.ofNanos(25_000), Duration.ofNanos(50_000),
        Duration.ofNanos(100_000), Duration.ofNanos(250_000), Duration.ofNanos(500_000), Duration.ofMillis(1), Duration.ofMillis(5),
        Duration.ofMillis(25), Duration.ofMillis(100), Duration.ofSeconds(1), Duration.ofSeconds(10)};

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
    private final LongAdder storeBytes;
    private final LongAdder retrieveBytes;
    private final LongAdder storeNanos;
    private final LongAdder retrieveNanos;

    private final String serviceInstanceId;
    private final LabelValues labels = new LabelValues(this);
    private final TransferMetrics transfers;
    private final LookupMetrics lookups;

    /** Without an instance label (tests). */
    public ServerMetrics() {
        this("");
    }

    /** {@code serviceInstanceId} labels every series ({@code --service-instance-id}); empty: no such label. */
    public ServerMetrics(String serviceInstanceId) {
        this(serviceInstanceId, true);
    }

    /**
     * A registry nobody scrapes, for the start-up warm-up's scratch server: its counts never reach the real metrics, and it
     * binds none of the JVM's meters (their GC listeners would stay registered after the warm-up).
     */
    public static ServerMetrics scratch() {
        return new ServerMetrics("", false);
    }

    private ServerMetrics(String serviceInstanceId, boolean jvmMeters) {
        this.serviceInstanceId = serviceInstanceId;
        if (!serviceInstanceId.isEmpty()) {
            registry.config().commonTags("service_instance_id", serviceInstanceId);
        }
        // what `promtool check metrics` objects to in Micrometer's binders: a counter in nanoseconds (process_cpu_usage
        // stays) and a gauge whose name ends in _count
        registry.config().meterFilter(MeterFilter.denyNameStartsWith("process.cpu.time")).meterFilter(new MeterFilter() {
            @Override
            public Meter.Id map(Meter.Id id) {
                return id.getName().equals("system.cpu.count") ? id.withName("system.cpus") : id;
            }
        });
        if (jvmMeters) {
            new JvmMemoryMetrics().bindTo(registry);
            new JvmGcMetrics().bindTo(registry);
            new JvmThreadMetrics().bindTo(registry);
            new ProcessorMetrics().bindTo(registry);
            new UptimeMetrics().bindTo(registry);
        }
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
        lookups = new LookupMetrics(this, labels);
        storeBytes = counter("lmcache_mp.store_bytes", "bytes copied into L1 by STORE");
        retrieveBytes = counter("lmcache_mp.retrieve_bytes", "bytes copied out of L1 by RETRIEVE");
        storeNanos = new LongAdder();
        retrieveNanos = new LongAdder();
        secondsCounter("lmcache_mp.store_copy_seconds", "time from submitting a STORE's copy to its completion", storeNanos);
        secondsCounter("lmcache_mp.retrieve_copy_seconds", "time from submitting a RETRIEVE's copy to its completion", retrieveNanos);
        transfers = new TransferMetrics(this, labels);
        functionCounter("lmcache_mp.log_lines", "lines written to the log, by level", LogCounters.warnings(), LongAdder::sum, "level", "warn");
        functionCounter("lmcache_mp.log_lines", "lines written to the log, by level", LogCounters.errors(), LongAdder::sum, "level", "error");
        functionCounter("lmcache_mp.log_suppressed_lines", "log lines a rate limit held back", LogCounters.suppressed(), LongAdder::sum);
        resetHooks.add(LogCounters::reset);
    }

    private Timer newTimer(Op op) {
        return Timer.builder("lmcache_mp.request_latency").description("time from receiving a request to queueing its reply")
                .tag("op", op.wireName()).serviceLevelObjectives(LATENCY_BUCKETS).register(registry);
    }

    /** A counter in seconds over nanoseconds counted in {@code nanos} (zeroed by {@link #reset}). */
    private void secondsCounter(String name, String description, LongAdder nanos) {
        FunctionCounter.builder(name, nanos, n -> n.sum() / 1e9).description(description).register(registry);
        synchronized (resettable) {
            resettable.add(nanos);
        }
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

    /** LMCache's lookup counters: tokens asked for and found by tier, lookups and early exits, per model_name and cache_salt. */
    public LookupMetrics lookups() {
        return lookups;
    }

    /** The L0-L1 copy series (LMCache's num_submitted/finished_*, throughput histograms, num_chunks_loaded). */
    public TransferMetrics transfers() {
        return transfers;
    }

    LabelValues labels() {
        return labels;
    }

    /** A label value from the wire, bounded (see {@link LabelValues}). */
    public String label(String label, String value) {
        return labels.of(label, value);
    }

    /**
     * The Prometheus text: the registry's series, then {@code target_info} (LMCache's resource attributes)
     * and {@code lmcache_mp_build_info}, written here because the Prometheus client reserves {@code _info}.
     */
    public String scrape() {
        StringBuilder out = new StringBuilder(registry.scrape());
        out.append("# HELP target_info Target metadata\n# TYPE target_info gauge\n");
        out.append("target_info{service_instance_id=\"").append(escape(serviceInstanceId))
                .append("\",service_name=\"lmcache-server\",service_version=\"").append(escape(Versions.version())).append("\"} 1\n");
        out.append("# HELP lmcache_mp_build_info The build of this server\n# TYPE lmcache_mp_build_info gauge\n");
        out.append("lmcache_mp_build_info{");
        if (!serviceInstanceId.isEmpty()) {
            out.append("service_instance_id=\"").append(escape(serviceInstanceId)).append("\",");
        }
        out.append("version=\"").append(escape(Versions.version())).append("\",commit=\"").append(escape(Versions.commit()))
                .append("\",java_version=\"").append(escape(Runtime.version().toString())).append("\"} 1\n");
        return out.toString();
    }

    private static String escape(String value) {
        return value.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
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
