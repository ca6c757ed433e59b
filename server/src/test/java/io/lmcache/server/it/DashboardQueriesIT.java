package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLMapper;
import io.lmcache.server.protocol.testing.Golden;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.MetricNameList;
import io.lmcache.server.testing.Processes;
import io.lmcache.server.testing.PromQl;
import io.lmcache.server.testing.Scrape;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Both dashboards against a live server with an fs_native L2 tier: traffic that stores (written
 * through to L2), looks up, retrieves, evicts, loads an evicted prompt back from L2 for a LOOKUP
 * and stores it again, a scrape before and after a second round of it, and every query of
 * LMCache's official dashboard that applies here (deploy/grafana/lmcache-official-dashboard-queries.json)
 * and of ours evaluated over the two scrapes as Prometheus would: each must return data. The alert
 * rules are evaluated the same way, and {@code promtool} (Debian's prometheus package) checks the
 * scrape and the rules when it is installed (CI requires it: LMCACHE_REQUIRE_PROMTOOL=1). The scrape is also held
 * against testdata/lmcache-metric-names.txt, every name LMCache's MP metrics and dashboard use, so a rename fails here.
 */
@ExtendWith(ServerLogOnFailure.class)
class DashboardQueriesIT {
    private static final Path ROOT = Golden.repoRoot();
    private static final ObjectMapper JSON = new ObjectMapper();
    /** 1 MiB chunk objects (4 layers, K and V, 16 blocks of 16 tokens x 4 heads x 64 x 2 bytes): 64 fit the pool. */
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(4, 32, 16, 4, 64);
    private static final int PROMPTS = 40;
    /** Series that exist only where CUDA copies run: our dashboard's GPU copy-rate line. */
    private static final Set<String> CUDA_ONLY = Set.of("lmcache_mp_gpu_copy_bytes_total", "lmcache_mp_gpu_copy_seconds_total");

    private static Path l2Dir;
    private static ServerProcess server;
    private static PromQl promQl;
    private static String lastScrape;

    @BeforeAll
    static void trafficBetweenTwoScrapes() throws Exception {
        l2Dir = Files.createTempDirectory("dashboard-l2");
        server = ServerProcess.start("--l1-size-gb", "0.0625", "--metrics-sample-rate", "1", "--instance-id", "dashboard-it", "--l2-adapter",
                "{\"type\":\"fs_native\",\"base_path\":\"" + l2Dir + "\"}");
        try (JavaWorker worker = new JavaWorker(server.endpoint(), 77, "dash/model", GEOMETRY)) {
            worker.register();
            worker.fill(JavaWorker.range(0, 32), 7);
            // the first round makes every series (histograms appear with their first sample), the second moves them
            round(worker, 0);
            Scrape before = Scrape.parse(Http.get(server.httpBase() + "/metrics").body());
            long startNs = System.nanoTime();
            round(worker, 1);
            lastScrape = Http.get(server.httpBase() + "/metrics").body();
            promQl = new PromQl(before, Scrape.parse(lastScrape), (System.nanoTime() - startNs) / 1e9);
        }
    }

    @AfterAll
    static void stop() throws IOException {
        if (server != null) {
            server.close();
        }
        if (l2Dir != null) {
            try (Stream<Path> files = Files.walk(l2Dir)) {
                for (Path file : files.sorted(Comparator.reverseOrder()).toList()) {
                    Files.delete(file);
                }
            }
        }
    }

    /**
     * Stores 40 two-chunk prompts (80 MiB into a 64 MiB pool: evictions; each written through to L2), reads the newest back, looks up
     * the evicted first (L1 misses it, L2 has it: loaded back and retrieved) and stores it again.
     */
    private static void round(JavaWorker worker, int round) throws InterruptedException {
        int[][] prompts = new int[PROMPTS][];
        for (int i = 0; i < PROMPTS; i++) {
            prompts[i] = JavaWorker.tokens(1000L * round + i, 512);
            assertTrue(worker.store(prompts[i], 0, 512, JavaWorker.range(0, 32), "store-" + round + "-" + i));
            // an object whose write-through runs is pinned and skipped by eviction: waiting for the writes keeps the LRU order
            // exact, so the oldest prompt is the one evicted (on a slow disk it otherwise outlives younger ones)
            writeThroughDone();
        }
        for (int i = PROMPTS - 4; i < PROMPTS; i++) {
            String request = "read-" + round + "-" + i;
            assertEquals(2, worker.lookup(prompts[i], 512, request, 1, 1), "the newest prompts are in L1");
            assertTrue(worker.retrieve(prompts[i], 0, 512, JavaWorker.range(0, 32), 0, request));
        }
        // the oldest prompt left L1 long ago (written through first): its LOOKUP loads both chunks from L2
        double fromL2 = Http.metric(server, "lmcache_mp_lookup_hit_l2_keys_total");
        String back = "from-l2-" + round;
        assertEquals(2, worker.lookup(prompts[0], 512, back, 1, 1), "the oldest prompt comes back from L2");
        assertEquals(fromL2 + 2, Http.metric(server, "lmcache_mp_lookup_hit_l2_keys_total"), "both chunks missed L1 and were loaded from L2");
        assertTrue(worker.retrieve(prompts[0], 0, 512, JavaWorker.range(0, 32), 0, back));
        assertTrue(worker.store(prompts[0], 0, 512, JavaWorker.range(0, 32), "again-" + round));
        // fewer tokens than a chunk: LMCache's early exit (no probe, 0 hits)
        assertEquals(0, worker.lookup(JavaWorker.tokens(5000L + round, 100), 100, "short-" + round, 1, 1));
        // the eviction loop ticks every 250 ms: let it turn a few times inside the window
        TimeUnit.MILLISECONDS.sleep(1200);
    }

    private static void writeThroughDone() {
        await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(5)).until(() -> {
            String scrape = Http.get(server.httpBase() + "/metrics").body();
            return Http.metric(scrape, "lmcache_mp_l2_store_submitted_objects_chunks_total") == Http.metric(scrape,
                    "lmcache_mp_l2_store_completed_objects_chunks_total") + Http.metric(scrape, "lmcache_mp_l2_store_failed_objects_chunks_total");
        });
    }

    @Test
    void everyApplicableQueryOfLmcachesOfficialDashboardReturnsData() throws Exception {
        JsonNode list = JSON.readTree(ROOT.resolve("deploy/grafana/lmcache-official-dashboard-queries.json").toFile());
        List<String> empty = new ArrayList<>();
        int applicable = 0;
        for (JsonNode query : list.get("queries")) {
            String expr = query.get("expr").asText();
            String status = query.get("status").asText();
            assertTrue(List.of("applicable", "feature not built yet", "not applicable", "not supported", "not built").stream()
                    .anyMatch(status::startsWith), "a known status: " + status);
            PromQl.Value value = promQl.eval(expr);
            if (status.equals("applicable")) {
                applicable++;
                if (!value.hasData()) {
                    empty.add(query.get("panel").asText() + " " + query.get("refId").asText() + ": " + expr + " -> " + value.series());
                }
            }
        }
        assertEquals(68, list.get("queries").size(), "every Prometheus query of the official dashboard is listed");
        assertEquals(47, applicable);
        assertTrue(empty.isEmpty(), "queries without data:\n" + String.join("\n", empty));
    }

    @Test
    void everyMetricNameOfLmcacheIsExportedOrExemptWithAReason() throws Exception {
        MetricNameList names = MetricNameList.read(ROOT.resolve("testdata/lmcache-metric-names.txt"));
        List<String> problems = names.problems(Scrape.parse(lastScrape));
        assertTrue(problems.isEmpty(), "testdata/lmcache-metric-names.txt against /metrics:\n" + String.join("\n", problems));
        List<String> queries = new ArrayList<>();
        JSON.readTree(ROOT.resolve("deploy/grafana/lmcache-official-dashboard-queries.json").toFile()).get("queries")
                .forEach(query -> queries.add(query.get("expr").asText()));
        assertEquals(Set.of(), names.unlisted(queries), "series the official dashboard queries that the name list leaves out");
        String sources;
        try (Stream<Path> files = Files.walk(ROOT.resolve("server/src/main/java"))) {
            StringBuilder text = new StringBuilder();
            for (Path file : files.filter(f -> f.toString().endsWith(".java")).toList()) {
                text.append(Files.readString(file));
            }
            sources = text.toString();
        }
        for (String name : names.faultCounterSourceNames()) {
            assertTrue(sources.contains('"' + name + '"'), "the fault counter " + name + " is made under this name");
        }
        // per round 6 LOOKUPs (4 from L1, 1 through L2, 1 early exit); the split adds up, the deprecated aliases follow it
        assertEquals(12, Http.metric(lastScrape, "lmcache_mp_lookups_requests_total", "model_name", "dash/model"));
        assertEquals(2, Http.metric(lastScrape, "lmcache_mp_lookup_early_exit_requests_total", "reason", "empty_chunk_hashes"));
        double l1 = Http.metric(lastScrape, "lmcache_mp_lookup_hit_l1_tokens_total");
        double l2 = Http.metric(lastScrape, "lmcache_mp_lookup_hit_l2_tokens_total");
        assertEquals(2 * 512, l2, "the oldest prompt's two chunks came from L2 in each round");
        assertEquals(Http.metric(lastScrape, "lmcache_mp_lookup_hit_tokens_total"), l1 + l2);
        assertEquals(l1, Http.metric(lastScrape, "lmcache_mp_lookup_hit_l1_total"), "the deprecated alias");
        assertEquals(l2, Http.metric(lastScrape, "lmcache_mp_lookup_hit_l2_total"), "the deprecated alias");
    }

    @Test
    void everyQueryOfOurDashboardReturnsData() throws Exception {
        JsonNode dashboard = JSON.readTree(ROOT.resolve("deploy/grafana/lmcache-server-dashboard.json").toFile());
        List<String> empty = new ArrayList<>();
        Set<String> titles = new TreeSet<>();
        boolean cuda = lastScrape.contains("lmcache_mp_gpu_copy_bytes_total");
        int evaluated = 0;
        for (JsonNode panel : dashboard.get("panels")) {
            titles.add(panel.get("title").asText());
            for (JsonNode target : panel.get("targets")) {
                String expr = target.get("expr").asText();
                assertTrue(expr.contains("instance=~\"$instance\""), "every query follows the instance variable: " + expr);
                if (!cuda && CUDA_ONLY.stream().anyMatch(expr::contains)) {
                    continue;
                }
                evaluated++;
                if (!promQl.eval(expr).hasData()) {
                    empty.add(panel.get("title").asText() + ": " + expr);
                }
            }
        }
        assertTrue(empty.isEmpty(), "queries without data:\n" + String.join("\n", empty));
        assertTrue(evaluated >= 30, "evaluated " + evaluated);
        for (String title : List.of("L1 pool preparation", "GPU copy rate (GB/s)", "Failures (per second)", "JVM memory", "JVM GC and CPU")) {
            assertTrue(titles.contains(title), "a panel " + title + " in " + titles);
        }
        JsonNode variables = dashboard.at("/templating/list");
        assertTrue(variables.toString().contains("\"name\":\"instance\""), "an instance variable");
    }

    @Test
    void theAlertRulesEvaluateAndStayQuietOnAHealthyServer() throws Exception {
        JsonNode rules = new YAMLMapper().readTree(ROOT.resolve("deploy/kubernetes/prometheus-rules.yaml").toFile());
        assertEquals("PrometheusRule", rules.get("kind").asText());
        Set<String> alerts = new TreeSet<>();
        for (JsonNode group : rules.at("/spec/groups")) {
            for (JsonNode rule : group.get("rules")) {
                String alert = rule.get("alert").asText();
                alerts.add(alert);
                PromQl.Value value = promQl.eval(rule.get("expr").asText());
                if (!alert.equals("LmcacheL1PoolFull")) {
                    // the traffic filled a small pool on purpose: that one may fire; the others describe faults that did not happen
                    assertFalse(value.hasData(), alert + " fires on a healthy server: " + value.series());
                }
            }
        }
        assertEquals(Set.of("LmcacheServerDown", "LmcacheServerAbsent", "LmcacheL1StoreAllocationFailures",
                "LmcacheL2PrefetchAllocationFailures", "LmcacheHandlerErrors", "LmcacheL1PoolFull", "LmcacheL1PoolNotReady",
                "LmcacheWorkersReaped", "LmcacheTransferFailures", "LmcacheTransferThreadsStuck"), alerts);
    }

    @Test
    void promtoolFindsNothingOfOursInTheScrapeAndAcceptsTheRules() throws Exception {
        boolean required = "1".equals(System.getenv("LMCACHE_REQUIRE_PROMTOOL"));
        boolean present = Files.isExecutable(Path.of("/usr/bin/promtool"));
        if (!present) {
            System.err.println("######## promtool not installed (apt-get install prometheus): the scrape was not linted");
        }
        assertTrue(present || !required, "LMCACHE_REQUIRE_PROMTOOL=1 but /usr/bin/promtool is missing");
        Assumptions.assumeTrue(present, "promtool not installed");
        Path scrape = Files.createTempFile("scrape", ".prom");
        Files.writeString(scrape, lastScrape);
        Processes.Result lint = Processes.run(new ProcessBuilder("/usr/bin/promtool", "check", "metrics").redirectInput(scrape.toFile()),
                Duration.ofSeconds(60));
        Files.deleteIfExists(scrape);
        List<String> complaints = lint.stdout().lines().toList();
        // LMCache's own spelling of these series (its dashboard queries them so): promtool wants snake_case
        List<String> ours = complaints.stream()
                .filter(line -> !line.matches("lmcache_mp_(l0_l1|l2)_(store|load)_throughput_GB_per_second \\S.*")).toList();
        assertTrue(ours.isEmpty(), "promtool check metrics:\n" + String.join("\n", ours));

        JsonNode rules = new YAMLMapper().readTree(ROOT.resolve("deploy/kubernetes/prometheus-rules.yaml").toFile());
        Path groups = Files.createTempFile("rules", ".yaml");
        Files.writeString(groups, new YAMLMapper().writeValueAsString(rules.get("spec")));
        Processes.Result check = Processes.run(new ProcessBuilder("/usr/bin/promtool", "check", "rules", groups.toString()), Duration.ofSeconds(60));
        Files.deleteIfExists(groups);
        assertEquals(0, check.exitCode(), check.stdout() + check.stderr());
    }
}
