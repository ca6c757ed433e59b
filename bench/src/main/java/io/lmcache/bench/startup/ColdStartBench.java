package io.lmcache.bench.startup;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.bench.Machine;
import io.lmcache.bench.ResultsFile;
import io.lmcache.server.testing.JavaWorker;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.ToDoubleFunction;
import java.util.stream.Stream;

/**
 * The JIT's cold start (issue 30), with and without the ahead-of-time cache: a fresh server through
 * {@code bin/lmcache-server}, a CPU worker in shared memory, then one-chunk STOREs one at a time. Each measured STORE's handler
 * CPU time is the change of {@code transfer_handler_cpu.store} in /status around it (plan + objects + copy, the host copy
 * included), its request path's the change of {@code request_path_cpu.store} less the queue wait, and the client's round
 * trip. Measured: the first {@code requests} STOREs after start, then {@code warmup} round trips unmeasured, then
 * {@code requests} more (warm). Start-up (first answer, /healthcheck 200) is StartupBench's, for the same launches.
 */
public final class ColdStartBench {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(1)).build();
    /** 32 layers of 2 heads of 64: a 256-token chunk is 1 024 pieces of 4 KiB (4 MiB), many pieces for little copying. */
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(32, 64, 16, 2, 64);
    private static final int CHUNK_TOKENS = 256;

    private ColdStartBench() {}

    /**
     * One STORE and the RETRIEVE of what it stored: handler CPU, request path CPU (decode, handle, reply), client round trip, in
     * microseconds.
     */
    record Sample(double handlerUs, double pathUs, double roundTripUs, double retrieveHandlerUs, double retrieveRoundTripUs) {}

    record Launch(StartupBench.Run startup, boolean aotUsed, List<Sample> fresh, List<Sample> warm, String warmup) {}

    /**
     * What one kind of launch differs by: its label, the AOT cache it names, the launcher's extra flags, and how long the
     * server idles after /healthcheck 200 before the worker connects (as vLLM loads its model before its workers REGISTER).
     */
    record Variant(String label, Path cache, boolean expectAot, List<String> args, long idleMs) {
        Variant(String label, Path cache, boolean expectAot, List<String> args) {
            this(label, cache, expectAot, args, 0);
        }
    }

    /**
     * The variants with {@code --warmup-iterations count} added where they run the warm-up (none names a count), or as they
     * are when {@code count} is null: the server skips its default count on a host of fewer than 4 cores, which gives every
     * warm-up variant the same server ({@link #checkWarmupRan} refuses such a run).
     */
    static List<Variant> withIterations(List<Variant> variants, String count) {
        if (count == null) {
            return variants;
        }
        return variants.stream().map(v -> v.args().contains("--warmup-iterations") ? v : new Variant(v.label() + ", `--warmup-iterations "
                + count + "`", v.cache(), v.expectAot(), Stream.concat(v.args().stream(), Stream.of("--warmup-iterations", count)).toList(),
                v.idleMs())).toList();
    }

    /** Fails a launch whose variant runs the warm-up while the server says none ran (a small host's skip, say), rather than measure it. */
    static void checkWarmupRan(Variant variant, JsonNode warmup) {
        boolean off = variant.args().contains("--warmup-iterations") && variant.args().get(variant.args().indexOf("--warmup-iterations") + 1).equals("0");
        if (!off && !warmup.path("ran").asBoolean()) {
            throw new IllegalStateException("the JIT warm-up did not run (" + warmup.path("stopped_by").asText() + ") for \"" + variant.label()
                    + "\": on a host of fewer than 4 cores give --warmup-iterations, e.g. 3001");
        }
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            options.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        int runs = Integer.parseInt(options.getOrDefault("runs", "3"));
        int requests = Integer.parseInt(options.getOrDefault("requests", "100"));
        int warmup = Integer.parseInt(options.getOrDefault("warmup", "2000"));
        Path cache = Path.of(options.getOrDefault("cache", "server/target/lmcache-server.aot")).toAbsolutePath();
        Path results = Path.of(options.getOrDefault("results", "bench/RESULTS.md"));
        if (!Files.isRegularFile(cache)) {
            throw new IllegalStateException(cache + " is missing: bench/run-startup.sh --cold-start trains it (bin/lmcache-aot-train)");
        }
        String compare = options.getOrDefault("compare", "aot");
        long idleMs = Long.parseLong(options.getOrDefault("idle-ms", "10000"));
        String idle = idleMs / 1000.0 + " s idle before the worker connects";
        List<Variant> variants = withIterations(switch (compare) {
            case "warmup" -> List.of(new Variant("warm-up off", cache, true, List.of("--warmup-iterations", "0")),
                    new Variant("warm-up on (defaults)", cache, true, List.of()),
                    new Variant("warm-up on, `--warmup-budget-ms 5000`", cache, true, List.of("--warmup-budget-ms", "5000")));
            case "background" -> List.of(new Variant("`--warmup-background-ms 0`, " + idle, cache, true, List.of("--warmup-background-ms", "0"), idleMs),
                    new Variant("`--warmup-background-ms 30000`, " + idle, cache, true, List.of("--warmup-background-ms", "30000"), idleMs));
            case "aot" -> List.of(new Variant("without", Path.of("/nonexistent/lmcache-server.aot"), false, List.of("--warmup-iterations", "0")),
                    new Variant("with", cache, true, List.of("--warmup-iterations", "0")));
            default -> throw new IllegalArgumentException("--compare must be aot, warmup or background, got " + compare);
        }, options.get("warmup-iterations"));
        String machine = Machine.describe();
        String load = Machine.loadAverages();
        Machine.CpuSample cpuBefore = Machine.CpuSample.take(ProcessHandle.current().pid());
        boolean warmupSection = !compare.equals("aot");
        StringBuilder table = new StringBuilder("| " + (warmupSection ? "JIT warm-up" : "AOT cache") + " | runs | first answer"
                + " | /healthcheck 200 | STORE handler p50: first 20 / first 100 / warm (first 100 ÷ warm) | RETRIEVE handler p50: first 20"
                + " / first 100 / warm (first 100 ÷ warm) | STORE request path p50: first 20 / first 100 / warm | STORE round trip p50: first"
                + " 20 / first 100 / warm | RETRIEVE round trip p50: first 20 / first 100 / warm |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        // the variants alternate, so a change in the machine's load falls on each
        List<List<Launch>> launches = new ArrayList<>();
        variants.forEach(v -> launches.add(new ArrayList<>()));
        for (int run = 0; run < runs; run++) {
            for (int v = 0; v < variants.size(); v++) {
                launches.get(v).add(launchOnce(variants.get(v), run, requests, warmup));
            }
        }
        StringBuilder warmups = new StringBuilder();
        for (int v = 0; v < variants.size(); v++) {
            table.append(row(variants.get(v).label(), launches.get(v)));
            for (Launch l : launches.get(v)) {
                warmups.append("- ").append(variants.get(v).label()).append(": `").append(l.warmup()).append("`\n");
            }
        }
        double foreign = Machine.CpuSample.take(ProcessHandle.current().pid()).foreignCoresSince(cpuBefore);
        StringBuilder md = new StringBuilder();
        String title = switch (compare) {
            case "warmup" -> "JIT cold start: the start-up warm-up (issue 30)";
            case "background" -> "JIT cold start: the warm-up's rounds after ready, until the first request (issue 30)";
            default -> "JIT cold start: the AOT cache (issue 30)";
        };
        Machine.sectionHead(md, title,
                ("bench/run-startup.sh --cold-start " + String.join(" ", args)).trim(), machine, load, foreign);
        md.append(warmupSection ? "A fresh `bin/lmcache-server --l1-size-gb 0.5` per run with the trained AOT cache, `--warmup-iterations 0`"
                + " against the warm-up (`/status` `jit_warmup` below, per launch)" : "A fresh `bin/lmcache-server --l1-size-gb 0.5"
                + " --warmup-iterations 0` per run, with `LMCACHE_AOT_CACHE` naming the trained cache or a missing file");
        md.append("; a CPU worker (32 layers, one-chunk STOREs of 4 MiB in 1 024 pieces, the host copy path), one request in flight."
                + " First 20 / first 100: the STOREs right after /healthcheck 200 (and the idle, where a row names one); warm: "
                + requests + " STOREs after " + warmup
                + " more round trips; each STORE is followed by the RETRIEVE of its chunk into other blocks. Handler:"
                + " `transfer_handler_cpu.store`/`.retrieve` (plan + objects + copy, the copy itself included); request"
                + " path: `request_path_cpu.store` decode + handle + reply. Medians over the runs of each run's p50, in µs; start-up"
                + " medians in ms.\n\n");
        md.append(table).append('\n');
        if (warmupSection) {
            md.append(ResultsFile.DETAILS).append("\n\n");
            md.append("Warm-up per launch (`/status` `jit_warmup` after the first ").append(requests).append(" STOREs):\n\n")
                    .append(warmups).append('\n');
        }
        System.out.println(md);
        ResultsFile.writeSection(results, compare.equals("aot") ? "cold-start" : "cold-start-" + compare, md.toString());
        System.out.println("# written to " + results);
    }

    private static String row(String label, List<Launch> launches) {
        double first20 = median(launches, l -> p50(l.fresh().subList(0, Math.min(20, l.fresh().size())), Sample::handlerUs));
        double first100 = median(launches, l -> p50(l.fresh(), Sample::handlerUs));
        double warm = median(launches, l -> p50(l.warm(), Sample::handlerUs));
        double retrieve100 = median(launches, l -> p50(l.fresh(), Sample::retrieveHandlerUs));
        double retrieveWarm = median(launches, l -> p50(l.warm(), Sample::retrieveHandlerUs));
        return String.format(Locale.ROOT, "| %s | %d | %s | %s | %.0f / %.0f / %.0f (%.2f×) | %s (%.2f×) | %s | %s | %s |%n", label,
                launches.size(), StartupBench.summary(launches.stream().mapToDouble(l -> l.startup().answerMs()).toArray()),
                StartupBench.summary(launches.stream().mapToDouble(l -> l.startup().healthyMs()).toArray()),
                first20, first100, warm, first100 / warm, triple(launches, Sample::retrieveHandlerUs), retrieve100 / retrieveWarm,
                triple(launches, Sample::pathUs), triple(launches, Sample::roundTripUs), triple(launches, Sample::retrieveRoundTripUs));
    }

    private static String triple(List<Launch> launches, ToDoubleFunction<Sample> value) {
        return String.format(Locale.ROOT, "%.0f / %.0f / %.0f", median(launches, l -> p50(l.fresh().subList(0, Math.min(20, l.fresh().size())), value)),
                median(launches, l -> p50(l.fresh(), value)), median(launches, l -> p50(l.warm(), value)));
    }

    private static Launch launchOnce(Variant variant, int run, int requests, int warmup) throws Exception {
        Path cache = variant.cache();
        boolean expectUsed = variant.expectAot();
        StartupBench.Launched server = StartupBench.launch("0.5", "lmcache_cold_start_bench_" + run, Map.of("LMCACHE_AOT_CACHE", cache.toString()),
                variant.args(), variant.idleMs() == 0);
        // the worker's socket is the server's first peer: after the idle (a TestClient probes as it connects)
        Thread.sleep(variant.idleMs());
        try (JavaWorker worker = new JavaWorker("tcp://127.0.0.1:" + server.port(), 4100 + run, "cold-start/model", GEOMETRY)) {
            String status = "http://127.0.0.1:" + server.httpPort() + "/status";
            boolean used = status(status).path("aot_cache").path("used").asBoolean();
            if (used != expectUsed) {
                throw new IllegalStateException("/status says the AOT cache was " + (used ? "" : "not ") + "used with " + cache);
            }
            worker.register();
            int[] blocks = JavaWorker.range(0, CHUNK_TOKENS / GEOMETRY.blockSize());
            worker.fill(blocks, run);
            List<Sample> fresh = measure(worker, status, blocks, 0, requests);
            JsonNode warmupNode = status(status).path("jit_warmup");
            checkWarmupRan(variant, warmupNode);
            String warmupStatus = warmupNode.toString();
            for (int i = 0; i < warmup; i++) {
                store(worker, blocks, requests + i);
                retrieve(worker, requests + i);
            }
            List<Sample> warm = measure(worker, status, blocks, requests + warmup, requests);
            return new Launch(server.run(), used, fresh, warm, warmupStatus);
        } finally {
            server.stop();
        }
    }

    private static List<Sample> measure(JavaWorker worker, String status, int[] blocks, int firstSeed, int count) throws Exception {
        List<Sample> samples = new ArrayList<>();
        JsonNode before = status(status);
        for (int i = 0; i < count; i++) {
            long startNs = System.nanoTime();
            store(worker, blocks, firstSeed + i);
            double roundTripUs = (System.nanoTime() - startNs) / 1e3;
            JsonNode after = status(status);
            long retrieveNs = System.nanoTime();
            retrieve(worker, firstSeed + i);
            double retrieveRoundTripUs = (System.nanoTime() - retrieveNs) / 1e3;
            JsonNode retrieved = status(status);
            samples.add(new Sample(seconds(after, "transfer_handler_cpu", "store", "plan", "objects", "copy") * 1e6
                    - seconds(before, "transfer_handler_cpu", "store", "plan", "objects", "copy") * 1e6,
                    seconds(after, "request_path_cpu", "store", "decode", "handle", "reply") * 1e6
                    - seconds(before, "request_path_cpu", "store", "decode", "handle", "reply") * 1e6, roundTripUs,
                    seconds(retrieved, "transfer_handler_cpu", "retrieve", "plan", "objects", "copy") * 1e6
                    - seconds(after, "transfer_handler_cpu", "retrieve", "plan", "objects", "copy") * 1e6, retrieveRoundTripUs));
            before = retrieved;
        }
        return samples;
    }

    /** A one-chunk STORE of a prompt no other request has (every one is written). */
    private static void store(JavaWorker worker, int[] blocks, int seed) {
        if (!worker.store(JavaWorker.tokens(1_000_000L + seed, CHUNK_TOKENS), 0, CHUNK_TOKENS, blocks, "cold-" + seed)) {
            throw new IllegalStateException("STORE " + seed + " failed");
        }
    }

    /** The RETRIEVE of what STORE {@code seed} wrote, into the blocks after it. */
    private static void retrieve(JavaWorker worker, int seed) {
        int[] blocks = JavaWorker.range(CHUNK_TOKENS / GEOMETRY.blockSize(), CHUNK_TOKENS / GEOMETRY.blockSize());
        if (!worker.retrieve(JavaWorker.tokens(1_000_000L + seed, CHUNK_TOKENS), 0, CHUNK_TOKENS, blocks, 0, "cold-" + seed)) {
            throw new IllegalStateException("RETRIEVE " + seed + " failed");
        }
    }

    private static double seconds(JsonNode status, String section, String op, String... phases) {
        double sum = 0;
        for (String phase : phases) {
            sum += status.path(section).path(op).path(phase + "_seconds").asDouble();
        }
        return sum;
    }

    private static JsonNode status(String url) throws Exception {
        HttpResponse<String> response = HTTP.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(5)).GET().build(),
                HttpResponse.BodyHandlers.ofString());
        return JSON.readTree(response.body());
    }

    private static double p50(List<Sample> samples, ToDoubleFunction<Sample> value) {
        double[] sorted = samples.stream().mapToDouble(value).sorted().toArray();
        return sorted[sorted.length / 2];
    }

    private static double median(List<Launch> launches, ToDoubleFunction<Launch> value) {
        double[] values = launches.stream().mapToDouble(value).toArray();
        Arrays.sort(values);
        return values[values.length / 2];
    }
}
