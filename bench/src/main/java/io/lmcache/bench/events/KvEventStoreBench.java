package io.lmcache.bench.events;

import io.lmcache.bench.Machine;
import io.lmcache.bench.Medians;
import io.lmcache.bench.ResultsFile;
import io.lmcache.server.agent.NamedThreads;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.ToDoubleFunction;
import org.HdrHistogram.Histogram;

/**
 * What subscribers of the KV-event stream cost a STORE (issue 28's acceptance: a STORE with 8 subscribers attached costs no more
 * than without). One server, one CPU worker storing a new one-chunk prefix per STORE (so every STORE appends a {@code stored}
 * record, and evictions {@code removed} ones once the pool is full), closed loop; phases alternate 0 and {@code --subscribers}
 * subscribers in every round, so the machine's load hits both alike. Each subscriber is its own DEALER on its own thread that
 * acks every batch at once, as LMCache's worker adapter does: the streams are as busy as they get.
 * Each phase reports the STORE round trips and the CPU time the server process used per STORE.
 *
 * <p>Usage (bench/run-kv-events.sh): {@code KvEventStoreBench [--stores 2000] [--warmup 500] [--rounds 3] [--subscribers 8] [--python python3|none]
 * [--results bench/RESULTS.md]}.
 */
public final class KvEventStoreBench {
    private static final String MODEL = "bench/events";
    private static final byte[] EMPTY = new byte[0];

    /** {@code acking}: the subscribers ack every batch (busy streams); else they take the first batch and never ack (no credit). */
    record Phase(int round, int subscribers, boolean acking, boolean childProcess, Timed timed, long batches) {
        double micros(double percentile) {
            return timed.histogram.getValueAtPercentile(percentile) / 1000.0;
        }

        double meanMicros() {
            return timed.histogram.getMean() / 1000.0;
        }
    }

    /**
     * A phase's timed STOREs: their round trips, and the CPU time the server process used per STORE meanwhile (10 ms resolution
     * over the phase: a cost figure that the machine's scheduling hardly moves, unlike the p99).
     */
    record Timed(Histogram histogram, double serverCpuMicrosPerStore) {}

    /** One subscriber: a DEALER on its own thread, subscribed from the log's end, acking each batch it receives. */
    private static final class Subscriber implements AutoCloseable {
        final TestClient client;
        final byte[] uid;
        final AtomicBoolean stop = new AtomicBoolean();
        final AtomicLong batches = new AtomicLong();
        final boolean acking;
        final Thread thread;

        Subscriber(ServerProcess server, long instanceId, boolean acking) {
            this.acking = acking;
            this.client = new TestClient(server.endpoint());
            this.uid = TestClient.pack(p -> p.packLong(instanceId));
            client.sendRaw(uid, TestClient.pack(p -> p.packString("subscribe_kv_events")), TestClient.pack(p -> p.packLong(instanceId)),
                    TestClient.pack(p -> p.packString(MODEL)), TestClient.pack(p -> p.packLong(0)),
                    TestClient.pack(p -> p.packInt(1024)));
            // runs on: bench-subscriber-<id>, receiving and acking until stopped
            this.thread = NamedThreads.thread("bench-subscriber-" + instanceId, true, this::drain);
            thread.start();
        }

        private void drain() {
            while (!stop.get()) {
                TestClient.Reply reply = client.receive(Duration.ofMillis(100));
                if (reply == null) {
                    continue;
                }
                if (reply.payload() == null) {
                    return; // the final reply: the stream ended
                }
                batches.incrementAndGet();
                if (acking) {
                    client.sendRaw(uid, EMPTY, "ack".getBytes(StandardCharsets.US_ASCII));
                }
            }
        }

        @Override
        public void close() throws InterruptedException {
            client.sendRaw(uid, EMPTY, "cancel".getBytes(StandardCharsets.US_ASCII));
            thread.join(5_000);
            stop.set(true);
            thread.join(5_000);
            client.close();
        }
    }

    private KvEventStoreBench() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> options = parse(args);
        int stores = Integer.parseInt(options.getOrDefault("stores", "2000"));
        int warmup = Integer.parseInt(options.getOrDefault("warmup", "500"));
        int rounds = Integer.parseInt(options.getOrDefault("rounds", "3"));
        int subscribers = Integer.parseInt(options.getOrDefault("subscribers", "8"));
        // "none": no phase with the subscribers in another process (it needs python3 and testclient/gpu/kv_subscriber.py)
        // (the test client's .venv where it exists: the system python3 may lack msgpack/msgspec)
        String python = options.getOrDefault("python", ChildSubscribers.defaultPython());
        Path results = Path.of(options.getOrDefault("results", "bench/RESULTS.md"));
        String machine = Machine.describe();
        System.out.println("# machine: " + machine);
        String load = Machine.loadAverages();
        List<Phase> phases = new ArrayList<>();
        double subscriptionsEnded;
        try (ServerProcess server = ServerProcess.start(Map.of(), "--l1-size-gb", "0.25", "--worker-reap-timeout-seconds", "0");
             JavaWorker worker = StoreFeeder.worker(server.endpoint(), 7, MODEL)) {
            long[] seed = {1_000_000};
            run(worker, warmup, seed, null);
            phase(server, worker, 0, subscribers, true, warmup, seed); // the stream path warmed up too (JIT), untimed
            int variants = python.equals("none") ? 3 : 4;
            for (int round = 1; round <= rounds; round++) {
                for (int variant = 0; variant < variants; variant++) {
                    phases.add(variant == 3 ? childPhase(python, server, worker, round, subscribers, stores, seed)
                            : phase(server, worker, round, variant == 0 ? 0 : subscribers, variant == 1, stores, seed));
                    Phase p = phases.getLast();
                    System.out.printf("round %d  %s subscribers  p50 %7.1f us  p99 %7.1f us  p99.9 %7.1f us  mean %7.1f us"
                            + "  server CPU %6.1f us/STORE  (%d batches)%n", round, label(p), p.micros(50), p.micros(99), p.micros(99.9),
                            p.meanMicros(), p.timed.serverCpuMicrosPerStore(), p.batches);
                }
            }
            subscriptionsEnded = Http.metric(server, "lmcache_mp_kv_events_subscriptions_ended_total");
        }
        String command = ("bench/run-kv-events.sh " + String.join(" ", args)).trim();
        ResultsFile.writeSection(results, "kv-event-store", report(phases, machine, command, load, stores, subscribers, subscriptionsEnded));
        System.out.println("# written to " + results);
    }

    private static Phase phase(ServerProcess server, JavaWorker worker, int round, int subscribers, boolean acking, int stores, long[] seed)
            throws Exception {
        List<Subscriber> attached = new ArrayList<>();
        for (int i = 0; i < subscribers; i++) {
            attached.add(new Subscriber(server, 100L * round + i + 1, acking));
        }
        try {
            Timed timed = timed(server, worker, stores, seed);
            long batches = 0;
            for (Subscriber s : attached) {
                batches += s.batches.get();
            }
            return new Phase(round, subscribers, acking, false, timed, batches);
        } finally {
            for (Subscriber s : attached) {
                s.close();
            }
        }
    }

    private static Phase childPhase(String python, ServerProcess server, JavaWorker worker, int round, int subscribers, int stores,
            long[] seed) throws Exception {
        try (ChildSubscribers child = new ChildSubscribers(python, server.port(), subscribers, 1000 + round)) {
            child.attach(MODEL);
            Timed timed = timed(server, worker, stores, seed);
            child.detach();
            return new Phase(round, subscribers, true, true, timed, child.stats().batches());
        }
    }

    private static Timed timed(ServerProcess server, JavaWorker worker, int stores, long[] seed) {
        Histogram histogram = new Histogram(60_000_000_000L, 3);
        double cpuBefore = Machine.processCpuSeconds(server.pid());
        run(worker, stores, seed, histogram);
        double cpu = Machine.processCpuSeconds(server.pid()) - cpuBefore;
        return new Timed(histogram, cpu * 1e6 / stores);
    }

    /** {@code count} STOREs, each a new one-chunk prefix (a new object and record); timed into {@code histogram} when not null. */
    private static void run(JavaWorker worker, int count, long[] seed, Histogram histogram) {
        for (int i = 0; i < count; i++) {
            long startNs = System.nanoTime();
            if (!StoreFeeder.storeNew(worker, seed[0]++)) {
                throw new IllegalStateException("STORE failed");
            }
            if (histogram != null) {
                histogram.recordValue(System.nanoTime() - startNs);
            }
        }
    }

    private static String report(List<Phase> phases, String machine, String command, String load, int stores, int subscribers,
            double ended) {
        StringBuilder md = new StringBuilder();
        md.append("### STORE latency with KV-event subscribers attached\n\n");
        md.append("Command: `").append(command).append("`  \n");
        md.append("Sources: commit ").append(Machine.source()).append("  \n");
        md.append("Machine: ").append(machine).append("  \n");
        md.append("Load averages before: ").append(load).append("\n\n");
        md.append(String.format("One server (`--l1-size-gb 0.25`, reaper off so idle subscriptions stay), one CPU worker (JavaWorker: 2 layers,"
                + " bf16, 256 KiB per chunk) storing a new one-chunk prefix per STORE, closed loop, %d STOREs per phase after a warm-up of"
                + " 500 STOREs without and 500 with subscribers; every round runs a phase with 0, one with %d subscribers acking every batch at once"
                + " (`subscribe_kv_events`, each a DEALER on its own thread in the load generator, as LMCache's worker adapter consumes)"
                + " and one with %d attached that never ack (the first batch, then no credit: the STORE path with subscriptions but no"
                + " stream work); where python3 and testclient/gpu/kv_subscriber.py are at hand, a fourth with %d acking subscribers in another"
                + " process (`kv_subscriber.py serve`). Latency is the worker's STORE round trip (request to reply); server CPU is the CPU time"
                + " the server process used while the phase's timed STOREs ran, per STORE (all its threads, from /proc, 10 ms resolution"
                + " over the phase: the stream work included, and the agents' brief spinning before they park; unlike the p99, it does not"
                + " count time the server waited for a core).%n%n", stores, subscribers,
                subscribers, subscribers));
        Map<String, List<Phase>> byVariant = new LinkedHashMap<>();
        phases.forEach(p -> byVariant.computeIfAbsent(label(p), k -> new ArrayList<>()).add(p));
        List<Phase> none = byVariant.get("0");
        md.append("Medians over the rounds, and each variant against the 0-subscriber phases:\n\n");
        md.append("| subscribers | p50 µs | p50 ratio | p99 µs | p99 ratio | server CPU µs/STORE | CPU ratio |\n|---|---:|---:|---:|---:|---:|---:|\n");
        ToDoubleFunction<Phase> p50 = p -> p.micros(50);
        ToDoubleFunction<Phase> p99 = p -> p.micros(99);
        ToDoubleFunction<Phase> cpu = p -> p.timed.serverCpuMicrosPerStore();
        byVariant.forEach((variant, list) -> md.append(String.format("| %s | %.1f | %.2f | %.1f | %.2f | %.1f | %.2f |%n", variant,
                Medians.of(list, p50), Medians.of(list, p50) / Medians.of(none, p50), Medians.of(list, p99), Medians.of(list, p99) / Medians.of(none, p99),
                Medians.of(list, cpu), Medians.of(list, cpu) / Medians.of(none, cpu))));
        md.append("\n").append(ResultsFile.DETAILS).append("\n\nEvery phase:\n\n");
        md.append("| round | subscribers | p50 µs | p99 µs | p99.9 µs | mean µs | server CPU µs/STORE | batches sent |\n"
                + "|---:|---|---:|---:|---:|---:|---:|---:|\n");
        for (Phase p : phases) {
            md.append(String.format("| %d | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %d |%n", p.round, label(p), p.micros(50), p.micros(99),
                    p.micros(99.9), p.meanMicros(), p.timed.serverCpuMicrosPerStore(), p.batches));
        }
        md.append(String.format("%nSubscriptions ended (cancelled at each phase's end): %.0f.%n", ended));
        return md.toString();
    }

    private static String label(Phase p) {
        return p.subscribers == 0 ? "0" : p.subscribers + (p.acking ? " acking" : " attached, no credit") + (p.childProcess ? ", in another process" : "");
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> options = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("usage: KvEventStoreBench [--stores N] [--warmup N] [--rounds N] [--subscribers N] [--python P|none]"
                        + " [--results FILE]; got " + args[i]);
            }
            options.put(args[i].substring(2), args[++i]);
        }
        return options;
    }
}
