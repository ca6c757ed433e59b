package io.lmcache.server.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class MetricNameListTest {
    @TempDir
    Path dir;

    private MetricNameList list() throws Exception {
        Path file = dir.resolve("names.txt");
        Files.writeString(file, """
                # a comment
                lmcache_mp_lookups_requests_total counter model_name,cache_salt
                lmcache_mp_copy_seconds histogram
                lmcache_mp_l1_read_failure_chunks_total fault-counter reason
                lmcache_mp_event_bus_* exempt: no event bus here
                lmcache_mp_l0_block_lifetime_seconds exempt: not built
                """);
        return MetricNameList.read(file);
    }

    @Test
    void aScrapeWithEveryNameLabelAndHistogramPartHasNoProblems() throws Exception {
        Scrape scrape = Scrape.parse("""
                lmcache_mp_lookups_requests_total{cache_salt="",model_name="m"} 2.0
                lmcache_mp_copy_seconds_bucket{le="+Inf"} 1.0
                lmcache_mp_copy_seconds_count 1.0
                lmcache_mp_copy_seconds_sum 0.5
                """);
        assertEquals(List.of(), list().problems(scrape), "a fault counter may be absent");
        assertEquals(List.of("lmcache_mp.l1_read_failure_chunks"), list().faultCounterSourceNames());
    }

    @Test
    void aRenameAMissingLabelAMissingHistogramPartAndAStaleExemptionAreEachReported() throws Exception {
        Scrape scrape = Scrape.parse("""
                lmcache_mp_lookups_total{model_name="m"} 2.0
                lmcache_mp_copy_seconds_bucket{le="+Inf"} 1.0
                lmcache_mp_copy_seconds_count 1.0
                lmcache_mp_event_bus_queue_depth 0.0
                """);
        assertEquals(List.of("lmcache_mp_lookups_requests_total (counter) is not exported", "lmcache_mp_copy_seconds_sum (histogram) is not exported",
                "lmcache_mp_event_bus_queue_depth is exported now: drop its exemption (no event bus here)"), list().problems(scrape));
        Scrape unlabelled = Scrape.parse("lmcache_mp_lookups_requests_total{model_name=\"m\"} 2.0\nlmcache_mp_l1_read_failure_chunks_total 1.0\n");
        assertEquals(List.of("lmcache_mp_lookups_requests_total has no label cache_salt", "lmcache_mp_copy_seconds_bucket (histogram) is not exported",
                "lmcache_mp_copy_seconds_count (histogram) is not exported", "lmcache_mp_copy_seconds_sum (histogram) is not exported",
                "lmcache_mp_l1_read_failure_chunks_total has no label reason"), list().problems(unlabelled), "a fault counter that is there is checked");
    }

    @Test
    void queriedNamesThatNoEntryCoversAreListed() throws Exception {
        assertEquals(Set.of("lmcache_mp_renamed_total"), list().unlisted(List.of(
                "rate(lmcache_mp_lookups_requests_total[5m]) / rate(lmcache_mp_renamed_total[5m])",
                "rate(lmcache_mp_l0_block_lifetime_seconds_sum[1m]) + lmcache_mp_event_bus_drain_lag_seconds",
                "histogram_quantile(0.5, rate(lmcache_mp_copy_seconds_bucket[1m]))")));
    }
}
