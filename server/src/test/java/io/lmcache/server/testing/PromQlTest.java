package io.lmcache.server.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

/** The PromQL subset the dashboard test relies on gives Prometheus's answers (an evaluator that always "has data" would prove nothing). */
class PromQlTest {
    private static final Scrape BEFORE = Scrape.parse("""
            # HELP c_total a counter
            # TYPE c_total counter
            c_total{op="store",i="a"} 10
            c_total{op="retrieve",i="a"} 4
            sub_total{device="cpu"} 5
            fin_total{device="cpu"} 5
            lat_bucket{le="0.1"} 0
            lat_bucket{le="1.0"} 0
            lat_bucket{le="+Inf"} 0
            lat_sum 0
            lat_count 0
            """);
    private static final Scrape AFTER = Scrape.parse("""
            c_total{op="store",i="a"} 30
            c_total{op="retrieve",i="a"} 4
            sub_total{device="cpu"} 9
            fin_total{device="cpu"} 8
            g{name="x \\"q\\""} 0.5
            lat_bucket{le="0.1"} 50
            lat_bucket{le="1.0"} 100
            lat_bucket{le="+Inf"} 100
            lat_sum 30
            lat_count 100
            """);
    private final PromQl promQl = new PromQl(BEFORE, AFTER, 10);

    private double only(String query) {
        PromQl.Value value = promQl.eval(query);
        assertEquals(1, value.series().size(), () -> query + " -> " + value.series());
        return value.series().values().iterator().next();
    }

    @Test
    void rateIsTheChangeOverTheTimeBetweenScrapes() {
        assertEquals(2.0, only("rate(c_total{op=\"store\"}[$__rate_interval])"));
        assertEquals(20.0, only("increase(c_total{op=~\"st.*\"}[5m])"));
        assertEquals(2.0, only("sum(rate(c_total[1m]))"), "2 + 0");
        assertEquals(2, promQl.eval("sum by (op) (rate(c_total{job=~\"$job\"}[1m]))").series().size(), "a Grafana variable matches all");
        assertEquals(0.3, only("rate(lat_sum[1m]) / rate(lat_count[1m])"), 1e-9);
    }

    @Test
    void binaryOperatorsMatchEqualLabelSetsAndComparisonsFilter() {
        assertEquals(1.0, only("sub_total - fin_total"));
        assertEquals(2.0, only("-1 + 3"));
        assertFalse(promQl.eval("sub_total - fin_total > 1").hasData(), "1 > 1 is false: the series is dropped");
        assertEquals(1.0, only("sub_total - fin_total >= 1"));
        assertTrue(promQl.eval("c_total - sub_total").series().isEmpty(), "no two series share a label set");
        assertEquals(0.5, only("g{name=\"x \\\"q\\\"\"}"));
        assertEquals(Map.of(Map.of(), 0.0), promQl.eval("sum(rate(missing_total[1m])) or vector(0)").series());
        assertEquals(2.0, only("sum(rate(c_total[1m])) or vector(0)"), "the left side wins where it has data");
        assertEquals(1.0, only("clamp_min(sum(rate(nothing_total[1m])) or vector(0), 1)"));
        assertEquals(Map.of(Map.of(), 1.0), promQl.eval("absent(missing_total)").series(), "absent: 1 where nothing is exported");
        assertTrue(promQl.eval("absent(c_total)").series().isEmpty(), "absent: nothing where the series exists");
    }

    @Test
    void histogramQuantileInterpolatesInsideTheBucket() {
        assertEquals(0.1, only("histogram_quantile(0.5, rate(lat_bucket[1m]))"), 1e-9);
        assertEquals(0.55, only("histogram_quantile(0.75, sum by (le) (rate(lat_bucket[1m])))"), 1e-9);
        assertFalse(new PromQl(BEFORE, BEFORE, 10).eval("histogram_quantile(0.5, rate(lat_bucket[1m]))").hasData(), "no samples: NaN");
    }

    @Test
    void anythingOutsideTheSubsetIsAnErrorNotAnEmptyAnswer() {
        assertThrows(IllegalArgumentException.class, () -> promQl.eval("sub_total - on(device) fin_total"));
        assertThrows(IllegalArgumentException.class, () -> promQl.eval("topk(1, c_total)"));
        assertFalse(promQl.eval("absent_metric").hasData());
    }
}
