package io.lmcache.server.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import io.lmcache.server.config.Versions;
import io.lmcache.server.loop.RequestMeters;
import io.lmcache.server.storage.ChunkKey;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.config.EvictionPolicyName;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.SlabAllocator;
import io.lmcache.server.storage.StoreCounters;
import io.lmcache.server.storage.StoreMeters;
import io.lmcache.server.testing.Http;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The scrape's shape: LMCache's names and labels, seconds, the latency histogram, the info series, bounded label values. */
class ServerMetricsTest {
    private static final long MIB = 1 << 20;
    private static final ServerMetrics.Build BUILD = new ServerMetrics.Build(Versions.version(), Versions.commit());

    @Test
    void latencyIsAHistogramInSecondsAndTheScrapeEndsWithTheInfoSeries() {
        ServerMetrics metrics = new ServerMetrics("pod-1", BUILD);
        RequestMeters requests = new RequestMeters(metrics);
        requests.latency(Op.PING, TimeUnit.MICROSECONDS.toNanos(30));
        requests.latency(Op.PING, TimeUnit.MILLISECONDS.toNanos(3));
        metrics.stored(MIB, TimeUnit.MILLISECONDS.toNanos(1500));
        String scrape = metrics.scrape();
        assertEquals(0, Http.metric(scrape, "lmcache_mp_request_latency_seconds_bucket", "op", "ping", "le", "2.5E-5"));
        assertEquals(1, Http.metric(scrape, "lmcache_mp_request_latency_seconds_bucket", "op", "ping", "le", "5.0E-5"));
        assertEquals(2, Http.metric(scrape, "lmcache_mp_request_latency_seconds_bucket", "op", "ping", "le", "0.005"));
        assertEquals(2, Http.metric(scrape, "lmcache_mp_request_latency_seconds_count", "op", "ping", "service_instance_id", "pod-1"));
        assertEquals(1.5, Http.metric(scrape, "lmcache_mp_store_copy_seconds_total"), 1e-9);
        assertFalse(scrape.contains("nanoseconds"), "no series in nanoseconds");
        assertEquals(1, Http.metric(scrape, "target_info", "service_instance_id", "pod-1", "service_name", "lmcache-server"));
        assertEquals(1, Http.metric(scrape, "lmcache_mp_build_info", "version", "0.1.0"));
        assertTrue(scrape.contains("system_cpus{"), "Micrometer's system_cpu_count, renamed for promtool");
        assertFalse(scrape.contains("process_cpu_time_ns"), "a counter in nanoseconds, left out for promtool");
        metrics.reset();
        assertEquals(0, Http.metric(metrics.scrape(), "lmcache_mp_request_latency_seconds_count", "op", "ping"));
    }

    @Test
    void lookupsCountAsLmcachesLookupSubscriberDoesWithTheOldSplitAsDeprecatedAliases() {
        ServerMetrics metrics = new ServerMetrics("pod-1", BUILD);
        metrics.showSaltsInClear(true);
        metrics.lookups().completed("m", "s", 1024, 256, 512, 2, 4);
        metrics.lookups().earlyExit("m", "s", LookupMetrics.EarlyExit.EMPTY_CHUNK_HASHES);
        String scrape = metrics.scrape();
        assertEquals(2, Http.metric(scrape, "lmcache_mp_lookups_requests_total", "model_name", "m", "cache_salt", "s"), "early exits included");
        assertEquals(1, Http.metric(scrape, "lmcache_mp_lookup_early_exit_requests_total", "cache_salt", "s", "reason", "empty_chunk_hashes"));
        assertEquals(1024, Http.metric(scrape, "lmcache_mp_lookup_requested_tokens_total", "model_name", "m"), "an early exit asks for 0 tokens");
        assertEquals(768, Http.metric(scrape, "lmcache_mp_lookup_hit_tokens_total", "model_name", "m"));
        assertEquals(256, Http.metric(scrape, "lmcache_mp_lookup_hit_l1_tokens_total", "model_name", "m", "cache_salt", "s"));
        assertEquals(512, Http.metric(scrape, "lmcache_mp_lookup_hit_l2_tokens_total", "model_name", "m", "cache_salt", "s"));
        assertEquals(2, Http.metric(scrape, "lmcache_mp_lookup_hit_l1_keys_total", "model_name", "m"));
        assertEquals(4, Http.metric(scrape, "lmcache_mp_lookup_hit_l2_keys_total", "model_name", "m"));
        assertEquals(256, Http.metric(scrape, "lmcache_mp_lookup_hit_l1_total"), "the deprecated alias");
        assertEquals(512, Http.metric(scrape, "lmcache_mp_lookup_hit_l2_total"), "the deprecated alias");
        assertTrue(scrape.contains("# HELP lmcache_mp_lookup_hit_l1_total DEPRECATED"), "its help says so");
        metrics.reset();
        assertEquals(0, Http.metric(metrics.scrape(), "lmcache_mp_lookups_requests_total"));
    }

    @Test
    void wireLabelValuesAreBoundedAndTheOverflowIsCounted() {
        ServerMetrics metrics = new ServerMetrics("pod-1", BUILD);
        for (int i = 0; i < LabelValues.LIMIT + 10; i++) {
            metrics.lookups().completed("model", "salt-" + i, 256, 0, 0, 0, 0);
        }
        String scrape = metrics.scrape();
        assertEquals(256, Http.metric(scrape, "lmcache_mp_lookup_requested_tokens_total", "cache_salt", metrics.label("cache_salt", "salt-0")));
        assertEquals(10 * 256, Http.metric(scrape, "lmcache_mp_lookup_requested_tokens_total", "cache_salt", LabelValues.OTHER));
        assertEquals(10, Http.metric(scrape, "lmcache_mp_metric_label_values_folded_total", "label", "cache_salt"));
        assertEquals(LabelValues.LIMIT, scrape.lines().filter(l -> l.startsWith("lmcache_mp_lookup_hit_tokens_total{")
                && !l.contains(LabelValues.OTHER)).count());
    }

    @Test
    void aSaltIsLabelledByAKeyedDigestUnlessClearLabelsWereAskedFor() {
        ServerMetrics metrics = new ServerMetrics("pod-1", BUILD);
        metrics.lookups().completed("m", "tenant-secret", 256, 256, 0, 1, 0);
        metrics.lookups().completed("m", "", 256, 0, 0, 0, 0);
        String scrape = metrics.scrape();
        assertFalse(scrape.contains("tenant-secret"), "the salt is nowhere in the scrape");
        String digest = metrics.label("cache_salt", "tenant-secret");
        assertTrue(digest.matches("s-[0-9a-f]{16}"), digest);
        assertEquals(256, Http.metric(scrape, "lmcache_mp_lookup_hit_tokens_total", "cache_salt", digest), "the series is the salt's");
        assertEquals(256, Http.metric(scrape, "lmcache_mp_lookup_requested_tokens_total", "cache_salt", ""), "the empty salt stays empty");
        assertFalse(digest.equals(new ServerMetrics("pod-1", BUILD).label("cache_salt", "tenant-secret")), "a key per process");
        String longSalt = "x".repeat(10_000);
        assertFalse(metrics.label("cache_salt", longSalt).equals(metrics.label("cache_salt", longSalt + "y")),
                "long salts are digested whole, not clipped");

        ServerMetrics clear = new ServerMetrics("pod-1", BUILD);
        clear.showSaltsInClear(true);
        clear.lookups().completed("m", "tenant-secret", 256, 256, 0, 1, 0);
        assertEquals(256, Http.metric(clear.scrape(), "lmcache_mp_lookup_hit_tokens_total", "cache_salt", "tenant-secret"));
    }

    @Test
    void modelAndSaltPairsAreBoundedTooAndFoldIntoOther() {
        ServerMetrics metrics = new ServerMetrics("pod-1", BUILD);
        // 40 x 40 pairs, each label within its own cap: the pairs are past LookupMetrics.MAX_SERIES
        for (int m = 0; m < 40; m++) {
            for (int s = 0; s < 40; s++) {
                metrics.lookups().completed("model-" + m, "salt-" + s, 256, 0, 0, 0, 0);
            }
        }
        String scrape = metrics.scrape();
        long series = scrape.lines().filter(l -> l.startsWith("lmcache_mp_lookup_requested_tokens_total{")).count();
        assertEquals(LookupMetrics.MAX_SERIES + 1, series, "the cap, and the _other pair");
        assertEquals((40 * 40 - LookupMetrics.MAX_SERIES) * 256.0, Http.metric(scrape, "lmcache_mp_lookup_requested_tokens_total",
                "model_name", LabelValues.OTHER, "cache_salt", LabelValues.OTHER));
    }

    @Test
    void anAllocationFailureIsCountedInChunksUnderItsModel() {
        ServerMetrics metrics = new ServerMetrics("pod-1", BUILD);
        StoreCounters counters = new StoreCounters();
        ObjectStore store = new ObjectStore(new SlabAllocator(4 * MIB, 4 * MIB), 4 * MIB, EvictionPolicyName.NOOP, TimeUnit.SECONDS.toNanos(60),
                TimeUnit.SECONDS.toNanos(60), System::nanoTime, counters);
        store.addReadyRegion(0);
        StoreMeters.bind(metrics, store);
        for (long hash = 1; hash <= 5; hash++) {
            store.reserve(ChunkKey.of("llama", "", 0, 0, hash, hash), MIB, 1);
        }
        assertEquals(1, Http.metric(metrics.scrape(), "lmcache_mp_l1_allocation_failure_chunks_total", "during", "l1_store", "model_name", "llama"));
    }
}
