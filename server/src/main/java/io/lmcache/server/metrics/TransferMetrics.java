package io.lmcache.server.metrics;

import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.distribution.HistogramSnapshot;
import io.micrometer.core.instrument.distribution.ValueAtPercentile;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.stream.Stream;

/**
 * LMCache's series for the copies between a worker's GPU blocks (L0) and the pool (L1): per device
 * {@code num_submitted_stores/retrieves} and {@code num_finished_stores/retrieves} (their difference is
 * what is in flight), per request {@code l0_l1_store/load_throughput_GB_per_second} (engine_id, device,
 * model_name) and per worker {@code num_chunks_loaded} (worker_id, model_name, cache_salt). A
 * finished transfer counts whether it succeeded or not, as LMCache's does, so the in-flight
 * difference never strands a failed one; only successes give a throughput sample.
 *
 * <p>The throughput is bytes over the time from submitting the copy to its completion (waiting for
 * the worker's event included); {@code gpu_copy_seconds} holds the GPU's own copy time.
 */
public final class TransferMetrics {
    private static final double GB = 1e9;
    /** GB/s: from a slow pageable copy to two GPUs' worth of PCIe 5. */
    private static final double[] THROUGHPUT_BUCKETS = {0.5, 1, 2, 5, 10, 20, 30, 40, 50, 60, 80, 120};
    /** Commit delays: a woken completion thread takes tens of microseconds, a missed wake-up one poll (250 µs). */
    private static final Duration[] COMMIT_DELAY_BUCKETS = Stream.of(50L, 100L, 250L, 500L, 1_000L, 2_000L, 5_000L, 20_000L, 100_000L)
            .map(Duration::ofNanos).map(d -> d.multipliedBy(1_000)).toArray(Duration[]::new);

    private final ServerMetrics metrics;
    private final LabelValues labels;
    private final Map<String, LongAdder> counters = new ConcurrentHashMap<>();
    private final Map<String, DistributionSummary> throughput = new ConcurrentHashMap<>();
    private final Map<String, Timer> commitDelays = new ConcurrentHashMap<>();

    TransferMetrics(ServerMetrics metrics, LabelValues labels) {
        this.metrics = metrics;
        this.labels = labels;
        // runs on: lmcache-http-* (/metrics/reset): histograms cannot be zeroed, so the next sample makes new ones
        metrics.onReset(() -> {
            throughput.values().forEach(metrics.registry()::remove);
            throughput.clear();
            commitDelays.values().forEach(metrics.registry()::remove);
            commitDelays.clear();
        });
    }

    /** A STORE's copy is about to be submitted on {@code device} ("cuda:N" or "cpu") for worker instance {@code engineId}. */
    public InFlight store(String device, long engineId, String model) {
        return new InFlight(true, device, engineId, model, -1, "");
    }

    /** A RETRIEVE's copy is about to be submitted; {@code workerId} is the kv rank that loads the chunks. */
    public InFlight retrieve(String device, long engineId, String model, int workerId, String cacheSalt) {
        return new InFlight(false, device, engineId, model, workerId, cacheSalt);
    }

    private LongAdder deviceCounter(TransferCatalogue entry, String device) {
        return counters.computeIfAbsent(entry.name() + '\0' + device, k -> metrics.declare(entry, device));
    }

    /** One submitted copy; {@link #finished} is called once, from its completion. */
    public final class InFlight {
        private final boolean store;
        private final String device;
        private final long engineId;
        private final String model;
        private final int workerId;
        private final String cacheSalt;
        private final long submittedNs = System.nanoTime();

        private InFlight(boolean store, String device, long engineId, String model, int workerId, String cacheSalt) {
            this.store = store;
            this.device = device;
            this.engineId = engineId;
            this.model = model;
            this.workerId = workerId;
            this.cacheSalt = cacheSalt;
            deviceCounter(store ? TransferCatalogue.NUM_SUBMITTED_STORES : TransferCatalogue.NUM_SUBMITTED_RETRIEVES, device).increment();
        }

        /**
         * The copy ended; {@code chunks} is how many chunks it covered. Runs on the transfer thread (host path)
         * or lmcache-cuda-events (CUDA path).
         */
        public void finished(boolean ok, long bytes, int chunks) {
            long elapsedNs = System.nanoTime() - submittedNs;
            deviceCounter(store ? TransferCatalogue.NUM_FINISHED_STORES : TransferCatalogue.NUM_FINISHED_RETRIEVES, device).increment();
            if (!ok) {
                return;
            }
            if (store) {
                metrics.stored(bytes, elapsedNs);
            } else {
                metrics.retrieved(bytes, elapsedNs);
                String worker = Integer.toString(workerId);
                metrics.declare(TransferCatalogue.NUM_CHUNKS_LOADED, labels.of("worker_id", worker), labels.of("model_name", model),
                        labels.of("cache_salt", cacheSalt)).add(chunks);
            }
            if (elapsedNs > 0 && bytes > 0) {
                summary(store, Long.toString(engineId), device, model).record(bytes / GB / (elapsedNs / 1e9));
            }
        }
    }

    /**
     * A STORE's chunks became visible to lookups {@code delayNs} after its copy ended on {@code device} (on CUDA, when the
     * GPU reached the transfer's end). Until then a LOOKUP that meets them waits, so this is what a prefix hit right after a
     * STORE may pay; not one of LMCache's series (its server replies only after the copy).
     */
    public void committed(String device, long delayNs) {
        commitDelays.computeIfAbsent(device, d -> metrics.timer(TransferCatalogue.STORE_COMMIT_DELAY, d)
                .publishPercentiles(0.5, 0.99).serviceLevelObjectives(COMMIT_DELAY_BUCKETS)
                .register(metrics.registry())).record(Math.max(0, delayNs), TimeUnit.NANOSECONDS);
    }

    /** Per device: commits, p50, p99 and max of the commit delay in seconds (over the timer's recent window), for /status. */
    public Map<String, Object> commitDelayStatus() {
        Map<String, Object> out = new TreeMap<>();
        commitDelays.forEach((device, timer) -> {
            HistogramSnapshot snapshot = timer.takeSnapshot();
            Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("commits", snapshot.count());
            for (ValueAtPercentile p : snapshot.percentileValues()) {
                entry.put(p.percentile() == 0.5 ? "p50_seconds" : "p99_seconds", p.value(TimeUnit.SECONDS));
            }
            entry.put("max_seconds", snapshot.max(TimeUnit.SECONDS));
            out.put(device, entry);
        });
        return out;
    }

    private DistributionSummary summary(boolean store, String engineId, String device, String model) {
        TransferCatalogue entry = store ? TransferCatalogue.L0_L1_STORE_THROUGHPUT : TransferCatalogue.L0_L1_LOAD_THROUGHPUT;
        String engine = labels.of("engine_id", engineId);
        String modelName = labels.of("model_name", model);
        return throughput.computeIfAbsent(entry.name() + '\0' + engine + '\0' + device + '\0' + modelName, k -> metrics.summary(entry,
                engine, device, modelName).serviceLevelObjectives(THROUGHPUT_BUCKETS).register(metrics.registry()));
    }
}
