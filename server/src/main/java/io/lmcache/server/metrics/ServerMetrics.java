package io.lmcache.server.metrics;

import io.lmcache.server.logging.LogCounters;
import io.lmcache.server.metrics.MeterSpec.Type;
import io.micrometer.core.instrument.DistributionSummary;
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
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Supplier;
import java.util.function.ToDoubleFunction;

/**
 * The server's meters, named as LMCache's exporter names them ({@code lmcache_mp_*}; Micrometer
 * adds {@code _total} to counters and {@code _seconds} to timers). Counters are {@link LongAdder}s
 * behind function counters, so a hot path counts without allocating and {@code POST /metrics/reset}
 * can zero them; meters a hot path touches are created once, up front. Every series carries
 * {@code service_instance_id} (LMCache's dashboard groups by it), and the scrape ends with
 * {@code target_info} and {@code lmcache_mp_build_info}. Every meter is made from an entry of a catalogue
 * ({@link Catalogues}): the owner of a count binds its meter, naming the entry and giving its label values.
 */
public final class ServerMetrics {
    static {
        // refuses two catalogue entries of one name before any meter is made
        Catalogues.entryCount();
    }

    private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    private final List<LongAdder> resettable = new ArrayList<>();
    private final List<Runnable> resetHooks = new ArrayList<>();
    private final Map<String, LongAdder> dynamic = new ConcurrentHashMap<>();
    private final LongAdder storeBytes;
    private final LongAdder retrieveBytes;
    private final LongAdder storeNanos;
    private final LongAdder retrieveNanos;

    private final String serviceInstanceId;
    private final Build build;
    private final LabelValues labels = new LabelValues(this);
    private final TransferMetrics transfers;
    private final LookupMetrics lookups;

    /**
     * The build {@code target_info} and {@code lmcache_mp_build_info} show (the configuration module knows it; metrics/ names
     * no other package of the server).
     */
    public record Build(String version, String commit) {
        /** What tests that do not look at the info series give. */
        public static final Build UNKNOWN = new Build("unknown", "unknown");
    }

    /** Without an instance label (tests). */
    public ServerMetrics() {
        this("", Build.UNKNOWN);
    }

    /** {@code serviceInstanceId} labels every series ({@code --service-instance-id}); empty: no such label. */
    public ServerMetrics(String serviceInstanceId, Build build) {
        this(serviceInstanceId, build, true);
    }

    /**
     * A registry nobody scrapes, for the start-up warm-up's scratch server: its counts never reach the real metrics, and it
     * binds none of the JVM's meters (their GC listeners would stay registered after the warm-up).
     */
    public static ServerMetrics scratch() {
        return new ServerMetrics("", Build.UNKNOWN, false);
    }

    private ServerMetrics(String serviceInstanceId, Build build, boolean jvmMeters) {
        this.serviceInstanceId = serviceInstanceId;
        this.build = build;
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
        lookups = new LookupMetrics(this, labels);
        storeBytes = counter(TransferCatalogue.STORE_BYTES);
        retrieveBytes = counter(TransferCatalogue.RETRIEVE_BYTES);
        storeNanos = new LongAdder();
        retrieveNanos = new LongAdder();
        secondsCounter(TransferCatalogue.STORE_COPY_SECONDS, storeNanos);
        secondsCounter(TransferCatalogue.RETRIEVE_COPY_SECONDS, retrieveNanos);
        transfers = new TransferMetrics(this, labels);
        functionCounter(ServerCatalogue.LOG_LINES, LogCounters.warnings(), LongAdder::sum, "warn");
        functionCounter(ServerCatalogue.LOG_LINES, LogCounters.errors(), LongAdder::sum, "error");
        functionCounter(ServerCatalogue.LOG_SUPPRESSED_LINES, LogCounters.suppressed(), LongAdder::sum);
        resetHooks.add(LogCounters::reset);
    }

    /** A counter in seconds over nanoseconds counted in {@code nanos} (zeroed by {@link #reset}). */
    private void secondsCounter(CatalogueEntry entry, LongAdder nanos) {
        MeterSpec spec = entry.spec();
        FunctionCounter.builder(spec.name(), nanos, n -> n.sum() / 1e9).description(spec.help()).tags(spec.tags(Type.COUNTER))
                .register(registry);
        synchronized (resettable) {
            resettable.add(nanos);
        }
    }

    /** A counter backed by a LongAdder (zeroed by {@link #reset}): {@code entry}'s meter with one value per label of it. */
    public LongAdder counter(CatalogueEntry entry, String... labelValues) {
        LongAdder adder = new LongAdder();
        functionCounter(entry, adder, LongAdder::sum, labelValues);
        synchronized (resettable) {
            resettable.add(adder);
        }
        return adder;
    }

    /** A counter over a value someone else keeps; {@code reset} zeroes it there. */
    public <T> void functionCounter(CatalogueEntry entry, T source, ToDoubleFunction<T> value, String... labelValues) {
        MeterSpec spec = entry.spec();
        FunctionCounter.builder(spec.name(), source, value).description(spec.help()).tags(spec.tags(Type.COUNTER, labelValues))
                .register(registry);
    }

    public void gauge(CatalogueEntry entry, Supplier<Number> value, String... labelValues) {
        MeterSpec spec = entry.spec();
        Gauge.builder(spec.name(), value).description(spec.help()).tags(Tags.of(spec.tags(Type.GAUGE, labelValues))).register(registry);
    }

    /** A timer of {@code entry}, for its maker to add buckets to and register in {@link #registry()}. */
    public Timer.Builder timer(CatalogueEntry entry, String... labelValues) {
        MeterSpec spec = entry.spec();
        return Timer.builder(spec.name()).description(spec.help()).tags(spec.tags(Type.TIMER, labelValues));
    }

    /** A distribution summary of {@code entry} (with its base unit), for its maker to add buckets to and register. */
    DistributionSummary.Builder summary(CatalogueEntry entry, String... labelValues) {
        MeterSpec spec = entry.spec();
        DistributionSummary.Builder builder = DistributionSummary.builder(spec.name()).description(spec.help())
                .tags(spec.tags(Type.SUMMARY, labelValues));
        return spec.baseUnit().isEmpty() ? builder : builder.baseUnit(spec.baseUnit());
    }

    /** Something else to zero on {@code POST /metrics/reset}. */
    public void onReset(Runnable hook) {
        synchronized (resetHooks) {
            resetHooks.add(hook);
        }
    }

    /** A counter for a rare event (failures): looked up by entry and label values, created on first use. */
    public void increment(CatalogueEntry entry, String... labelValues) {
        declare(entry, labelValues).increment();
    }

    /** Creates such a counter at zero now, so dashboards see the series before the first event. */
    public LongAdder declare(CatalogueEntry entry, String... labelValues) {
        MeterSpec spec = entry.spec();
        String key = spec.name() + Tags.of(spec.tags(Type.COUNTER, labelValues));
        LongAdder found = dynamic.get(key);
        if (found != null) {
            return found;
        }
        // each wire label is bounded on its own, their product is not (models x salts x workers): past the cap every wire
        // label of a new series folds into _other
        String[] values = dynamic.size() < MAX_DYNAMIC_SERIES ? labelValues : foldWireLabels(spec, labelValues);
        String folded = values == labelValues ? key : spec.name() + Tags.of(spec.tags(Type.COUNTER, values));
        return dynamic.computeIfAbsent(folded, k -> counter(entry, values));
    }

    /** Series made on first use ({@link #declare}) at most, before their wire labels fold into {@code _other}. */
    static final int MAX_DYNAMIC_SERIES = 8192;

    private static String[] foldWireLabels(MeterSpec spec, String[] labelValues) {
        String[] values = labelValues.clone();
        for (int i = 0; i < values.length && i < spec.labels().size(); i++) {
            if (LabelValues.WIRE.contains(spec.labels().get(i))) {
                values[i] = LabelValues.OTHER;
            }
        }
        return values;
    }

    /**
     * {@code --metrics-clear-salt-labels}: label series with each cache salt in clear rather than its keyed digest. Call before
     * the first request.
     */
    public void showSaltsInClear(boolean clear) {
        labels.showSecretsInClear(clear);
    }

    public MeterRegistry registry() {
        return registry;
    }

    public PrometheusMeterRegistry prometheus() {
        return registry;
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
                .append("\",service_name=\"lmcache-server\",service_version=\"").append(escape(build.version())).append("\"} 1\n");
        MeterSpec info = ServerCatalogue.BUILD_INFO.spec();
        String name = info.prometheusName();
        out.append("# HELP ").append(name).append(' ').append(info.help()).append("\n# TYPE ").append(name).append(" gauge\n");
        out.append(name).append('{');
        if (!serviceInstanceId.isEmpty()) {
            out.append("service_instance_id=\"").append(escape(serviceInstanceId)).append("\",");
        }
        String[] tags = info.tags(Type.GAUGE, build.version(), build.commit(), Runtime.version().toString());
        for (int i = 0; i < tags.length; i += 2) {
            out.append(i == 0 ? "" : ",").append(tags[i]).append("=\"").append(escape(tags[i + 1])).append('"');
        }
        out.append("} 1\n");
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
