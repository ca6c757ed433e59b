package io.lmcache.bench.latency;

import io.lmcache.bench.Machine;
import io.lmcache.bench.Medians;
import io.lmcache.bench.ResultsFile;
import io.lmcache.bench.events.ChildSubscribers;
import io.lmcache.bench.events.StoreFeeder;
import io.lmcache.server.agent.NamedThreads;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;
import org.HdrHistogram.Histogram;
import org.zeromq.ZContext;

/**
 * Request-path latency: closed-loop PING and LOOKUP round trips against the real server process,
 * and, measured in the same run by the same client code, against {@link EchoServer}, the least a
 * JeroMQ ROUTER can do. Both run as subprocesses on free ports for the whole run; each
 * measurement alternates echo then server, so a change in the machine's load hits both. A
 * measurement during which other processes used more than {@code --max-foreign-cores} is repeated
 * (up to {@code --attempts}) and the quietest attempt kept.
 *
 * <p>With {@code --subscribers N} (issue 28: a server with KV-event subscribers attached answers no slower), every server
 * measurement is taken twice per round, the order alternating between rounds: with 0 and with N acking {@code subscribe_kv_events}
 * subscribers in another process ({@link ChildSubscribers}, attached for each measurement's warm-up and window). During both, a
 * {@link StoreFeeder} in this JVM STOREs at {@code --feed-stores-per-s} (of its own model, so LOOKUP stays a miss), so that the
 * streams are busy while PING and LOOKUP are timed and the two differ only in the subscribers.
 *
 * <p>Usage (from the repository root, see bench/run-latency.sh): {@code RequestLatencyBench
 * [--warmup-s 5] [--duration-s 10] [--requests PING,LOOKUP] [--clients 1,16] [--rounds 3] [--attempts 3]
 * [--max-foreign-cores 0.15] [--subscribers 0] [--feed-stores-per-s 500] [--python .venv/bin/python|python3|none]
 * [--results bench/RESULTS.md]}.
 */
public final class RequestLatencyBench {
    private static final int MAX_RESTARTS = 5;
    private static final int ECHO = 0;
    private static final int SERVER = 1;
    /** The feeder's model: its records are what the subscribers get; LOOKUP's model ({@link Requests#MODEL}) stays empty. */
    static final String FEED_MODEL = "bench/latency-feed";
    private static final long FEED_INSTANCE_ID = 0x0FEE_D000_0000_0001L;
    private static final int SUBSCRIBER_SEED = 4242;

    /** A benchmarked process, with what it takes to start it again. */
    record Target(String name, Process process, String endpoint, List<String> command, int port, String readyLine) {
        Target restart() throws IOException, InterruptedException {
            return start(name, command, port, readyLine);
        }
    }

    /** One measurement's request and client count, in a round. */
    record Case(int round, String request, IntFunction<Requests.Kind> kinds, int clients) {}

    /** What one measurement measures: a target, under the name the report gives it, with the child subscribers attached or not. */
    record Variant(int target, String name, boolean subscribed) {}

    /** With {@code --subscribers}: the child subscribers and the background STOREs. */
    record Streams(ChildSubscribers subscribers, StoreFeeder feeder, String python, double storesPerS) {}

    /**
     * {@code feedStoresPerS}: the feeder's STOREs answered per second in the window (0 without); {@code received}: what the
     * subscribers got during the measurement (null without them).
     */
    record Result(int round, String request, int clients, String target, Histogram histogram, double seconds, double targetCpuSeconds,
            double foreignCores, String loadBefore, int attempt, int brokenSockets, double feedStoresPerS, ChildSubscribers.Counts received) {
        Result received(ChildSubscribers.Counts counts) {
            return new Result(round, request, clients, target, histogram, seconds, targetCpuSeconds, foreignCores, loadBefore, attempt,
                    brokenSockets, feedStoresPerS, counts);
        }

        double throughput() {
            return histogram.getTotalCount() / seconds;
        }

        /** CPU the echo or server process used per request answered in the window. */
        double cpuMicrosPerRequest() {
            return targetCpuSeconds * 1e6 / histogram.getTotalCount();
        }

        double micros(double percentile) {
            return histogram.getValueAtPercentile(percentile) / 1000.0;
        }
    }

    private final double warmupS;
    private final double durationS;
    private final double maxForeign;
    private final int attempts;
    private final List<Target> targets = new ArrayList<>();
    private int restarts;
    private Streams streams;

    private RequestLatencyBench(double warmupS, double durationS, double maxForeign, int attempts) {
        this.warmupS = warmupS;
        this.durationS = durationS;
        this.maxForeign = maxForeign;
        this.attempts = attempts;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> options = parse(args);
        RequestLatencyBench bench = new RequestLatencyBench(Double.parseDouble(options.getOrDefault("warmup-s", "5")),
                Double.parseDouble(options.getOrDefault("duration-s", "10")), Double.parseDouble(options.getOrDefault("max-foreign-cores", "0.15")),
                Integer.parseInt(options.getOrDefault("attempts", "3")));
        int rounds = Integer.parseInt(options.getOrDefault("rounds", "3"));
        List<Integer> clientCounts = new ArrayList<>();
        for (String c : options.getOrDefault("clients", "1,16").split(",")) {
            clientCounts.add(Integer.parseInt(c.trim()));
        }
        Map<String, IntFunction<Requests.Kind>> kinds = new LinkedHashMap<>();
        // one instance id per client, like one PING-ing vLLM worker each
        kinds.put("PING", client -> Requests.ping(0x1234_5678_9ABC_DEF0L + client));
        kinds.put("LOOKUP", client -> Requests.lookup(client, 42 + client));
        kinds.keySet().retainAll(List.of(options.getOrDefault("requests", "PING,LOOKUP").split(",")));
        Path results = Path.of(options.getOrDefault("results", "bench/RESULTS.md"));
        int subscribers = Integer.parseInt(options.getOrDefault("subscribers", "0"));
        String python = options.getOrDefault("python", ChildSubscribers.defaultPython());
        if (subscribers > 0 && python.equals("none")) {
            System.out.println("# --subscribers " + subscribers + " ignored: no python to run testclient/gpu/kv_subscriber.py (--python none,"
                    + " or the script is missing), so no subscriber variant and no feeder: the plain report");
            subscribers = 0;
        }
        String machine = Machine.describe();
        System.out.println("# machine: " + machine);
        // runs on: a shutdown thread, when the run is stopped from outside (SIGTERM, a timeout): the echo, the server and the
        // subscriber process would otherwise go on loading the machine for the next benchmark
        Runtime.getRuntime().addShutdownHook(NamedThreads.thread("bench-stop", false,
                () -> ProcessHandle.current().descendants().forEach(ProcessHandle::destroy)));
        try {
            bench.startTargets();
            if (subscribers > 0) {
                bench.startStreams(python, subscribers, Double.parseDouble(options.getOrDefault("feed-stores-per-s", "500")));
            }
            List<Result> all = bench.measureRounds(rounds, kinds, clientCounts);
            String command = ("bench/run-latency.sh " + String.join(" ", args)).trim();
            ResultsFile.writeSection(results, "request-latency", bench.report(all, machine, command, rounds));
            System.out.println("# written to " + results);
        } finally {
            bench.stop();
        }
    }

    /** Whole rounds, so that a slow spell of the machine lands in one round, which the medians then outvote. */
    private List<Result> measureRounds(int rounds, Map<String, IntFunction<Requests.Kind>> kinds, List<Integer> clientCounts) throws Exception {
        List<Result> all = new ArrayList<>();
        for (int round = 1; round <= rounds; round++) {
            for (var kind : kinds.entrySet()) {
                for (int clients : clientCounts) {
                    for (Variant variant : variants(round)) {
                        all.add(measureQuietest(new Case(round, kind.getKey(), kind.getValue(), clients), variant));
                    }
                }
            }
        }
        return all;
    }

    /** The echo, then the server; with subscribers the server twice, the order alternating between rounds. */
    private List<Variant> variants(int round) {
        Variant echo = new Variant(ECHO, "echo", false);
        Variant bare = new Variant(SERVER, "server", false);
        if (streams == null) {
            return List.of(echo, bare);
        }
        Variant subscribed = new Variant(SERVER, subscribedName(), true);
        return round % 2 == 1 ? List.of(echo, bare, subscribed) : List.of(echo, subscribed, bare);
    }

    private String subscribedName() {
        return "server, " + streams.subscribers.count() + " subscribers";
    }

    /** The feeder of the server's KV-event log and the child subscribers, both idle until a server measurement. */
    private void startStreams(String python, int subscribers, double storesPerS) throws IOException, InterruptedException {
        Target server = targets.get(SERVER);
        StoreFeeder feeder = new StoreFeeder(server.endpoint, FEED_MODEL, FEED_INSTANCE_ID, storesPerS);
        try {
            streams = new Streams(new ChildSubscribers(python, server.port, subscribers, SUBSCRIBER_SEED), feeder, python, storesPerS);
        } catch (IOException | RuntimeException e) {
            feeder.close();
            throw e;
        }
        System.out.printf("# %d subscribers in another process (%s %s serve); a feeder of %.0f STOREs/s (model %s) during every server"
                + " measurement%n", subscribers, python, "testclient/gpu/kv_subscriber.py", storesPerS, FEED_MODEL);
    }

    private void stop() throws InterruptedException {
        if (streams != null) {
            try {
                streams.feeder.close();
            } finally {
                streams.subscribers.close();
            }
        }
        for (Target target : targets) {
            target.process.destroy();
            if (!target.process.waitFor(15, TimeUnit.SECONDS)) {
                target.process.destroyForcibly();
            }
        }
    }

    private void startTargets() throws IOException, InterruptedException {
        int echoPort = freePort();
        // the echo JVM gets the flags bin/lmcache-server gives the server; its classpath goes in an argument file, so
        // that tools matching servers by command line (pkill -f lmcache-server) do not take it for one
        Path argFile = Files.createTempFile("lmcache-bench-echo-", ".args");
        Files.writeString(argFile, "-cp \"" + System.getProperty("java.class.path") + "\"\n");
        argFile.toFile().deleteOnExit();
        targets.add(start("echo", List.of(javaBinary(), "-XX:+UseZGC", "-Xms256m", "-Xmx1g", "@" + argFile, EchoServer.class.getName(),
                Integer.toString(echoPort)), echoPort, "echo ready"));
        int serverPort = freePort();
        targets.add(start("server", List.of("bin/lmcache-server", "--l1-size-gb", "1", "--http-port", "0", "--host", "127.0.0.1",
                "--port", Integer.toString(serverPort)), serverPort, "ready: ZeroMQ ROUTER"));
    }

    /**
     * Measures target {@code t} until a window is quiet enough or the attempts run out, keeping the quietest; a target
     * that something else ended meanwhile is started again and the measurement repeated.
     */
    private Result measureQuietest(Case c, Variant variant) throws Exception {
        Result best = null;
        for (int attempt = 1; attempt <= attempts; attempt++) {
            Target target = targets.get(variant.target);
            Result r;
            try {
                r = measureWithStreams(c, variant, target, attempt);
            } catch (RuntimeException e) {
                if (target.process.isAlive() || restarts == MAX_RESTARTS) {
                    throw e;
                }
                System.out.println("# the " + target.name + " process exited during the measurement (code " + target.process.exitValue()
                        + "): restarting it, repeating the measurement");
                restarts++;
                targets.set(variant.target, target.restart());
                if (variant.target == SERVER && streams != null) {
                    streams.feeder.reconnect(); // the new server knows no worker
                }
                attempt--;
                continue;
            }
            System.out.printf("round %d %-6s %2d clients %-6s p50 %7.1f us  p99 %7.1f us  p99.9 %7.1f us  %7.0f req/s  %5.1f us CPU/req"
                    + "  (other CPU %.2f cores, load %s, attempt %d)%s%n", c.round, r.request, r.clients, r.target, r.micros(50), r.micros(99),
                    r.micros(99.9), r.throughput(), r.cpuMicrosPerRequest(), r.foreignCores, r.loadBefore, attempt, streamsNote(r));
            if (best == null || r.foreignCores < best.foreignCores) {
                best = r;
            }
            if (r.foreignCores <= maxForeign) {
                break;
            }
        }
        return best;
    }

    private static String streamsNote(Result r) {
        String note = r.feedStoresPerS > 0 ? String.format("  feeder %.0f STOREs/s", r.feedStoresPerS) : "";
        if (r.received != null) {
            note += String.format(", subscribers got %d records in %d batches (%d lost, %d subscribers erring)", r.received.records(),
                    r.received.batches(), r.received.lost(), r.received.slotsWithErrors());
        }
        return note;
    }

    /**
     * A server measurement with the feeder storing throughout (with {@code --subscribers}), the subscribers attached before the
     * warm-up and detached after the window where the variant has them; any other measurement as it is.
     */
    private Result measureWithStreams(Case c, Variant variant, Target target, int attempt) throws Exception {
        if (streams == null || variant.target != SERVER) {
            return measure(c, target, variant.name, attempt);
        }
        streams.feeder.resume();
        try {
            if (!variant.subscribed) {
                return measure(c, target, variant.name, attempt);
            }
            ChildSubscribers.Counts before = streams.subscribers.stats();
            streams.subscribers.attach(FEED_MODEL);
            Result r;
            try {
                r = measure(c, target, variant.name, attempt);
            } finally {
                streams.subscribers.detach();
            }
            return r.received(streams.subscribers.stats().since(before));
        } finally {
            streams.feeder.pause();
        }
    }

    /** One measurement: {@code clients} threads, each its own DEALER, closed loop, warm-up then timed window. */
    private Result measure(Case c, Target target, String name, int attempt) throws Exception {
        String request = c.request;
        int clients = c.clients;
        List<Histogram> histograms = new ArrayList<>();
        int[] broken = new int[clients];
        CountDownLatch connected = new CountDownLatch(clients);
        CountDownLatch go = new CountDownLatch(1);
        long[] window = new long[2]; // [measure from, end], set before go opens
        List<Thread> threads = new ArrayList<>();
        Throwable[] failure = new Throwable[1];
        try (ZContext context = new ZContext(1)) {
            for (int i = 0; i < clients; i++) {
                Requests.Kind kind = c.kinds.apply(i);
                // the echo answers only [uid, op]; the server adds PING's True
                int expectedFrames = target.name.equals("echo") ? 2 : kind.serverReplyFrames();
                Histogram histogram = new Histogram(60_000_000_000L, 3);
                histograms.add(histogram);
                int index = i;
                // runs on: bench-client-<i>, one closed-loop client each
                Thread thread = NamedThreads.thread("bench-client-" + i, false, () -> {
                    try (LoadClient client = new LoadClient(context, target.endpoint, kind)) {
                        broken[index] = client.brokenSockets;
                        connected.countDown();
                        go.await();
                        while (true) {
                            long startNs = System.nanoTime();
                            if (startNs - window[1] >= 0) {
                                break;
                            }
                            long rtt = client.roundTrip(expectedFrames);
                            if (startNs - window[0] >= 0) {
                                histogram.recordValue(rtt);
                            }
                        }
                    } catch (Throwable t) {
                        synchronized (failure) {
                            failure[0] = t;
                        }
                        connected.countDown();
                    }
                });
                threads.add(thread);
                thread.start();
            }
            connected.await();
            long startNs = System.nanoTime();
            window[0] = startNs + (long) (warmupS * 1e9);
            window[1] = window[0] + (long) (durationS * 1e9);
            String load = Machine.loadAverages();
            go.countDown();
            long targetPid = target.process.pid();
            long[] pids = streams == null ? new long[] {ProcessHandle.current().pid(), targetPid}
                    : new long[] {ProcessHandle.current().pid(), targetPid, streams.subscribers.pid()};
            sleepUntil(window[0]);
            Machine.CpuSample before = Machine.CpuSample.take(pids);
            double targetCpuBefore = Machine.processCpuSeconds(targetPid);
            long fedBefore = streams == null ? 0 : streams.feeder.stores();
            sleepUntil(window[1]);
            Machine.CpuSample after = Machine.CpuSample.take(pids);
            double targetCpu = Machine.processCpuSeconds(targetPid) - targetCpuBefore;
            double fedPerS = streams == null ? 0 : (streams.feeder.stores() - fedBefore) / durationS;
            for (Thread thread : threads) {
                thread.join();
            }
            if (failure[0] != null) {
                throw new IllegalStateException(request + " against " + target.name + " failed"
                        + (target.process.isAlive() ? "" : " (the " + target.name + " process has exited: see its log)"), failure[0]);
            }
            Histogram merged = new Histogram(60_000_000_000L, 3);
            histograms.forEach(merged::add);
            int brokenSockets = 0;
            for (int b : broken) {
                brokenSockets += b;
            }
            return new Result(c.round, request, clients, name, merged, durationS, targetCpu, after.foreignCoresSince(before), load,
                    attempt, brokenSockets, fedPerS, null);
        }
    }

    private String report(List<Result> all, String machine, String command, int rounds) {
        StringBuilder md = new StringBuilder();
        md.append("### Request-path latency (PING, LOOKUP)\n\n");
        md.append("Command: `").append(command).append("`  \n");
        md.append("Sources: commit ").append(Machine.source()).append("  \n");
        md.append("Machine: ").append(machine).append("\n\n");
        md.append(String.format("Closed loop, each client its own JeroMQ DEALER in its own thread (one JeroMQ I/O thread in the load generator);"
                + " per measurement %.0f s warm-up, then %.0f s measured; %d rounds of every measurement. Baseline: `EchoServer`"
                + " (bare JeroMQ ROUTER, blocking receive, one thread, echoes `[identity, uid, op]`), driven by the same client code,"
                + " measured right before the server each time. Server: `bin/lmcache-server --l1-size-gb 1 --http-port 0` (empty pool,"
                + " so LOOKUP is a 2-chunk miss: it decodes the 512-token key, hashes its first chunk and finds it missing; since 5a7c2c3"
                + " a lookup hashes no further than the first miss, before that it hashed both chunks).%n%n",
                warmupS, durationS, rounds));
        if (streams != null) {
            md.append(String.format("With `--subscribers`: during every server measurement a feeder STOREs new chunks at %.0f a second"
                    + " (of another model: the LOOKUPs stay misses), so \"server\" below is the server with the feeder and no subscribers;"
                    + " \"%s\" is the same with the subscribers, in the section after these tables.%n%n", streams.storesPerS, subscribedName()));
        }
        md.append("Latency, median over the rounds of each figure, and the server relative to the echo (goal: server p50 ≤ 1.3 × echo"
                + " p50; the p50 ratio's range over the rounds, each round's server against its own echo, in brackets):\n\n");
        md.append("| request | clients | echo p50 µs | server p50 µs | p50 ratio | echo p99 µs | server p99 µs | p99 ratio"
                + " | echo p99.9 µs | server p99.9 µs | p99.9 ratio | p50 goal |\n");
        md.append("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|\n");
        StringBuilder cpu = new StringBuilder();
        cpu.append("| request | clients | echo req/s | server req/s | throughput ratio | echo CPU µs/request | server CPU µs/request |\n");
        cpu.append("|---|---:|---:|---:|---:|---:|---:|\n");
        for (List<Result> results : byCase(all).values()) {
            List<Result> echo = of(results, "echo");
            List<Result> server = of(results, "server");
            double low = Double.MAX_VALUE;
            double high = 0;
            for (int i = 0; i < Math.min(echo.size(), server.size()); i++) {
                double ratio = server.get(i).micros(50) / echo.get(i).micros(50);
                low = Math.min(low, ratio);
                high = Math.max(high, ratio);
            }
            String name = results.getFirst().request;
            int clients = results.getFirst().clients;
            double[] e = {Medians.of(echo, r -> r.micros(50)), Medians.of(echo, r -> r.micros(99)), Medians.of(echo, r -> r.micros(99.9))};
            double[] v = {Medians.of(server, r -> r.micros(50)), Medians.of(server, r -> r.micros(99)), Medians.of(server, r -> r.micros(99.9))};
            md.append(String.format("| %s | %d | %.1f | %.1f | %.2f (%.2f–%.2f) | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f | %s |%n", name, clients,
                    e[0], v[0], v[0] / e[0], low, high, e[1], v[1], v[1] / e[1], e[2], v[2], v[2] / e[2], v[0] <= 1.3 * e[0] ? "met" : "missed"));
            double echoRate = Medians.of(echo, Result::throughput);
            double serverRate = Medians.of(server, Result::throughput);
            cpu.append(String.format("| %s | %d | %.0f | %.0f | %.2f | %.1f | %.1f |%n", name, clients, echoRate, serverRate, serverRate / echoRate,
                    Medians.of(echo, Result::cpuMicrosPerRequest), Medians.of(server, Result::cpuMicrosPerRequest)));
        }
        // RESULTS.md keeps the latency the goal is judged on; throughput and CPU go with the details
        md.append("\n").append(ResultsFile.DETAILS).append("\n");
        md.append("\nThroughput and the CPU time the echo or server process used per request answered (medians over the rounds):\n\n");
        md.append(cpu);
        md.append(String.format("%nEvery measurement (\"other CPU\" = cores used by processes other than the load generator%s and the"
                + " measured process during the window; above %.2f a measurement was repeated, up to %d times, and the quietest kept):%n%n",
                streams == null ? "" : ", the subscriber process", maxForeign, attempts));
        md.append("| round | request | clients | target | p50 µs | p99 µs | p99.9 µs | req/s | CPU µs/request | other CPU (cores)"
                + " | load avg before | attempt |\n");
        md.append("|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---|---:|\n");
        for (Result r : all) {
            md.append(String.format("| %d | %s | %d | %s | %.1f | %.1f | %.1f | %.0f | %.1f | %.2f | %s | %d |%n", r.round, r.request, r.clients,
                    r.target, r.micros(50), r.micros(99), r.micros(99.9), r.throughput(), r.cpuMicrosPerRequest(), r.foreignCores,
                    r.loadBefore, r.attempt));
        }
        int broken = all.stream().mapToInt(Result::brokenSockets).sum();
        md.append(String.format("%nDEALER sockets replaced because they never answered the NOOP probe (the JeroMQ quirk): %d."
                + " Measurements repeated because the echo or the server process was ended from outside during them: %d.%n", broken, restarts));
        md.append("\nCaveats: the load generator, the server and the echo share this machine's cores, so with 16 clients the run is"
                + " CPU-bound and latency and throughput mostly measure CPU spent per request (a throughput ratio below 1 is the server"
                + " spending more of it than the echo). PING and these LOOKUPs (2 KiB keys) are answered on the server's socket"
                + " thread, which, like the echo, blocks in its receive when it has nothing to do.\n");
        if (streams != null) {
            md.append(streamsReport(all));
        }
        return md.toString();
    }

    private static Map<String, List<Result>> byCase(List<Result> all) {
        Map<String, List<Result>> byCase = new LinkedHashMap<>();
        for (Result r : all) {
            byCase.computeIfAbsent(r.request + " " + r.clients, k -> new ArrayList<>()).add(r);
        }
        return byCase;
    }

    private static List<Result> of(List<Result> results, String target) {
        return results.stream().filter(r -> r.target.equals(target)).toList();
    }

    /** The section "With N KV-event subscribers": the server with the feeder, without and with the subscribers, and the echo. */
    private String streamsReport(List<Result> all) {
        String subscribed = subscribedName();
        int n = streams.subscribers.count();
        StringBuilder md = new StringBuilder();
        md.append("\n#### With ").append(n).append(" KV-event subscribers\n\n");
        md.append(String.format("Every server measurement was taken twice per round, the order alternating between rounds: \"server\""
                + " (0 subscribers) and \"%s\": %d `subscribe_kv_events` subscribers acking every batch at once, in another process"
                + " (`%s testclient/gpu/kv_subscriber.py serve`, one process for the run; attached before each measurement's warm-up,"
                + " detached after its window, each resuming from its cursor). During both, a feeder in the load generator (one CPU"
                + " worker, JavaWorker: 2 layers, bf16, 256 KiB per chunk, model `%s`) STOREs a new one-chunk prefix at %.0f/s, so that"
                + " every subscriber gets batches (`stored` records, and `removed` ones once the 1 GiB pool is full) while PING and LOOKUP"
                + " are timed: the two variants differ only in the subscribers. No feeder during the echo's measurements.%n%n",
                subscribed, n, streams.python, FEED_MODEL, streams.storesPerS));
        md.append("Medians over the rounds; the ratio's range over the rounds, each round's two variants against each other, in brackets;"
                + " each variant's p50 against the echo's (goal ≤ 1.3):\n\n");
        md.append("| request | clients | echo p50 µs | server p50 µs | with ").append(n).append(" p50 µs | p50 ratio ").append(n)
                .append("/0 | server p99 µs | with ").append(n).append(" p99 µs | p99 ratio ").append(n).append("/0")
                .append(" | server p50 / echo | goal | with ").append(n).append(" p50 / echo | goal |\n");
        md.append("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---:|---|\n");
        StringBuilder received = new StringBuilder();
        received.append("| request | clients | feeder STOREs/s, 0 subscribers | feeder STOREs/s, ").append(n)
                .append(" subscribers | records received | batches received | lost batches | subscribers with errors |\n");
        received.append("|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for (List<Result> results : byCase(all).values()) {
            md.append(streamsRow(results, subscribed));
            received.append(receivedRow(results, subscribed));
        }
        md.append("\nWhat the subscribers received (sums over the rounds' kept measurements) and the feeder's rate (medians):\n\n");
        md.append(received);
        md.append(String.format("%nFeeder STOREs in the run: %d answered, %d failed%s.%n", streams.feeder.stores(), streams.feeder.failures(),
                streams.feeder.failures() == 0 ? "" : " (the last: " + streams.feeder.lastFailure() + ")"));
        return md.toString();
    }

    private static String streamsRow(List<Result> results, String subscribed) {
        List<Result> echo = of(results, "echo");
        List<Result> bare = of(results, "server");
        List<Result> with = of(results, subscribed);
        double low = Double.MAX_VALUE;
        double high = 0;
        for (int i = 0; i < Math.min(bare.size(), with.size()); i++) {
            double ratio = with.get(i).micros(50) / bare.get(i).micros(50);
            low = Math.min(low, ratio);
            high = Math.max(high, ratio);
        }
        double e50 = Medians.of(echo, r -> r.micros(50));
        double[] b = {Medians.of(bare, r -> r.micros(50)), Medians.of(bare, r -> r.micros(99))};
        double[] w = {Medians.of(with, r -> r.micros(50)), Medians.of(with, r -> r.micros(99))};
        return String.format("| %s | %d | %.1f | %.1f | %.1f | %.2f (%.2f–%.2f) | %.1f | %.1f | %.2f | %.2f | %s | %.2f | %s |%n",
                results.getFirst().request, results.getFirst().clients, e50, b[0], w[0], w[0] / b[0], low, high, b[1], w[1], w[1] / b[1],
                b[0] / e50, b[0] <= 1.3 * e50 ? "met" : "missed", w[0] / e50, w[0] <= 1.3 * e50 ? "met" : "missed");
    }

    private static String receivedRow(List<Result> results, String subscribed) {
        List<Result> with = of(results, subscribed);
        long records = with.stream().mapToLong(r -> r.received.records()).sum();
        long batches = with.stream().mapToLong(r -> r.received.batches()).sum();
        long lost = with.stream().mapToLong(r -> r.received.lost()).sum();
        int erring = with.stream().mapToInt(r -> r.received.slotsWithErrors()).max().orElse(0);
        return String.format("| %s | %d | %.0f | %.0f | %d | %d | %d | %d |%n", results.getFirst().request, results.getFirst().clients,
                Medians.of(of(results, "server"), Result::feedStoresPerS), Medians.of(with, Result::feedStoresPerS), records, batches, lost, erring);
    }

    private static Target start(String name, List<String> command, int port, String readyLine) throws IOException, InterruptedException {
        Path log = Files.createTempFile("lmcache-bench-" + name + "-", ".log");
        Process process = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(180); // bin/lmcache-server may build first
        while (!Files.readString(log).contains(readyLine)) {
            if (!process.isAlive() || System.nanoTime() - deadline > 0) {
                process.destroyForcibly();
                throw new IllegalStateException(name + " did not start (" + String.join(" ", command) + "):\n" + Files.readString(log));
            }
            Thread.sleep(50);
        }
        System.out.println("# " + name + " ready on port " + port + " (pid " + process.pid() + ", log " + log + ")");
        return new Target(name, process, "tcp://127.0.0.1:" + port, command, port, readyLine);
    }

    private static void sleepUntil(long deadlineNs) throws InterruptedException {
        long left;
        while ((left = deadlineNs - System.nanoTime()) > 0) {
            TimeUnit.NANOSECONDS.sleep(left);
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0)) {
            return socket.getLocalPort();
        }
    }

    private static String javaBinary() {
        return Path.of(System.getProperty("java.home"), "bin", "java").toString();
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> options = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("usage: RequestLatencyBench [--warmup-s S] [--duration-s S] [--requests PING,LOOKUP]"
                        + " [--clients 1,16] [--rounds N] [--max-foreign-cores C] [--attempts N] [--subscribers N] [--feed-stores-per-s R]"
                        + " [--python P|none] [--results FILE]; got " + args[i]);
            }
            options.put(args[i].substring(2), args[++i]);
        }
        return options;
    }
}
