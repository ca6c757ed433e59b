package io.lmcache.bench.startup;

import io.lmcache.bench.Machine;
import io.lmcache.bench.ResultsFile;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.io.IOException;
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
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Start-up as an operator sees it, through {@code bin/lmcache-server}: from the launch to the first
 * answered request (GET_CHUNK_SIZE over ZeroMQ, sent at once and answered as soon as the ROUTER is
 * bound) and to {@code /healthcheck} answering 200 (the first pool region prepared), per pool size.
 * The test suite asserts only that the server answers before its pool is prepared (L1TierIT); how
 * long it takes is this benchmark's figure, on a machine whose load it records.
 */
public final class StartupBench {
    private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(1)).build();

    private StartupBench() {}

    /** One launch: milliseconds to the first answer and to a healthy /healthcheck. */
    record Run(double answerMs, double healthyMs) {}

    public static void main(String[] args) throws Exception {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            options.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        List<String> pools = List.of(options.getOrDefault("pools-gb", "1,4").split(","));
        int runs = Integer.parseInt(options.getOrDefault("runs", "5"));
        Path results = Path.of(options.getOrDefault("results", "bench/RESULTS.md"));
        String machine = Machine.describe();
        String load = Machine.loadAverages();
        Machine.CpuSample cpuBefore = Machine.CpuSample.take(ProcessHandle.current().pid());
        StringBuilder table = new StringBuilder("| pool | runs | first answer, median (min..max) | /healthcheck 200, median (min..max) |\n"
                + "|---|---:|---:|---:|\n");
        for (String pool : pools) {
            List<Run> measured = new ArrayList<>();
            for (int run = 0; run < runs; run++) {
                measured.add(launchOnce(pool.strip(), run));
            }
            table.append(String.format(Locale.ROOT, "| %s GiB | %d | %s | %s |%n", pool.strip(), runs,
                    summary(measured.stream().mapToDouble(Run::answerMs).toArray()),
                    summary(measured.stream().mapToDouble(Run::healthyMs).toArray())));
        }
        double foreign = Machine.CpuSample.take(ProcessHandle.current().pid()).foreignCoresSince(cpuBefore);
        StringBuilder md = new StringBuilder();
        Machine.sectionHead(md, "Start-up", ("bench/run-startup.sh " + String.join(" ", args)).trim(), machine, load, foreign);
        md.append("`bin/lmcache-server --l1-size-gb N` (a JVM start, the launcher's Java check included) on free ports; a GET_CHUNK_SIZE"
                + " sent at launch and answered once the ROUTER is bound, and /healthcheck polled every 10 ms until 200 (the request"
                + " loop turns, the loopback PING is answered and the first pool region is prepared). The rest of the pool is prepared"
                + " in the background after that.\n\n");
        md.append(table).append('\n');
        System.out.println(md);
        ResultsFile.writeSection(results, "startup", md.toString());
        System.out.println("# written to " + results);
    }

    private static Run launchOnce(String poolGb, int run) throws Exception {
        Launched launched = launch(poolGb, "lmcache_startup_bench_" + run, Map.of());
        try {
            return launched.run();
        } finally {
            launched.stop();
        }
    }

    /** A server launched through bin/lmcache-server and answering, with its start-up times. */
    record Launched(Process process, Path log, int port, int httpPort, Run run) {
        void stop() throws Exception {
            process.destroy();
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                process.destroyForcibly();
            }
            Files.deleteIfExists(log);
        }
    }

    /** Launches bin/lmcache-server with {@code env} added and waits until it answers and is healthy (the cold-start bench too). */
    static Launched launch(String poolGb, String shmName, Map<String, String> env) throws Exception {
        return launch(poolGb, shmName, env, List.of());
    }

    /** As above, with {@code extraArgs} appended to the launcher's command line. */
    static Launched launch(String poolGb, String shmName, Map<String, String> env, List<String> extraArgs) throws Exception {
        return launch(poolGb, shmName, env, extraArgs, true);
    }

    /**
     * As above; with {@code answerProbe} false no ZeroMQ request is sent (the first answer is then not measured, NaN): the
     * launch's first request is the caller's, as when the warm-up's background rounds must run until a worker connects.
     */
    static Launched launch(String poolGb, String shmName, Map<String, String> env, List<String> extraArgs, boolean answerProbe)
            throws Exception {
        int port = ServerProcess.freePort();
        int httpPort = ServerProcess.freePort();
        Path log = Files.createTempFile("startup-bench", ".log");
        ProcessBuilder builder = new ProcessBuilder("bin/lmcache-server", "--l1-size-gb", poolGb, "--host", "127.0.0.1", "--port",
                Integer.toString(port), "--http-host", "127.0.0.1", "--http-port", Integer.toString(httpPort), "--shm-name",
                shmName).redirectErrorStream(true).redirectOutput(log.toFile());
        builder.command().addAll(extraArgs);
        builder.environment().putAll(env);
        long launchNs = System.nanoTime();
        Process process = builder.start();
        try (TestClient client = answerProbe ? new TestClient("tcp://127.0.0.1:" + port) : null) {
            CompletableFuture<Long> answered = client == null ? CompletableFuture.completedFuture(Long.MIN_VALUE) : CompletableFuture.supplyAsync(() -> {
                client.call(21);
                return System.nanoTime();
            });
            long healthyNs = 0;
            long deadlineNs = launchNs + TimeUnit.SECONDS.toNanos(120);
            while (healthyNs == 0) {
                if (!process.isAlive() || System.nanoTime() - deadlineNs > 0) {
                    throw new IllegalStateException("the server did not become healthy:\n" + Files.readString(log));
                }
                if (healthy(httpPort)) {
                    healthyNs = System.nanoTime();
                } else {
                    TimeUnit.MILLISECONDS.sleep(10);
                }
            }
            long answerNs = answered.get(60, TimeUnit.SECONDS);
            double answerMs = answerNs == Long.MIN_VALUE ? Double.NaN : (answerNs - launchNs) / 1e6;
            return new Launched(process, log, port, httpPort, new Run(answerMs, (healthyNs - launchNs) / 1e6));
        } catch (Exception | Error e) {
            new Launched(process, log, port, httpPort, null).stop();
            throw e;
        }
    }

    private static boolean healthy(int httpPort) {
        try {
            return HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + httpPort + "/healthcheck")).timeout(Duration.ofSeconds(1))
                    .GET().build(), HttpResponse.BodyHandlers.discarding()).statusCode() == 200;
        } catch (IOException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }

    static String summary(double[] ms) {
        if (Arrays.stream(ms).anyMatch(Double::isNaN)) {
            return "not measured";
        }
        double[] sorted = ms.clone();
        Arrays.sort(sorted);
        return String.format(Locale.ROOT, "%.0f ms (%.0f..%.0f)", sorted[sorted.length / 2], sorted[0], sorted[sorted.length - 1]);
    }
}
