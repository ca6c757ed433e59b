package io.lmcache.bench.hardening;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.bench.Machine;
import io.lmcache.bench.ResultsFile;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.ServerMemory;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;

/**
 * The soak: {@code --clients} worker processes ({@link SoakWorker}) each making {@code --round-trips}
 * request/reply round trips of STORE / LOOKUP+QUERY / RETRIEVE cycles with checksummed data against a pool small enough
 * that it evicts all the time, while {@code --kills} of them are SIGKILLed along the way and
 * replaced by new workers that do the rest; the reaper (short liveness flags, as LivenessIT uses)
 * must free the dead ones. Records round trips, lost replies, checksum mismatches, evictions,
 * reaped workers and RSS before/after in bench/RESULTS.md.
 *
 * <p>Usage: {@code SoakBench [--clients 16] [--round-trips 10000] [--kills 8] [--pool-gb 0.0625]
 * [--reply-timeout-ms 10000] [--max-minutes 20] [--seed 7] [--results bench/RESULTS.md]}
 */
public final class SoakBench {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** One client slot: the worker process now serving it, what it last reported, and what is left to do. */
    private static final class Slot {
        final int index;
        long remaining;
        Process process;
        long instanceId;
        volatile String last = "";
        volatile boolean ready;
        volatile boolean done;

        Slot(int index, long remaining) {
            this.index = index;
            this.remaining = remaining;
        }
    }

    private final String endpoint;
    private final long replyTimeoutMs;
    private final Random random;
    private final SoakWorker.Counts total = new SoakWorker.Counts();
    private long nextInstanceId = 0x50AC_0000_0000L;
    private int started;

    private SoakBench(String endpoint, long replyTimeoutMs, long seed) {
        this.endpoint = endpoint;
        this.replyTimeoutMs = replyTimeoutMs;
        this.random = new Random(seed);
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> options = FloodBench.options(args);
        int clients = Integer.parseInt(options.getOrDefault("clients", "16"));
        long roundTrips = Long.parseLong(options.getOrDefault("round-trips", "10000"));
        int kills = Integer.parseInt(options.getOrDefault("kills", "8"));
        String poolGb = options.getOrDefault("pool-gb", "0.0625");
        long replyTimeoutMs = Long.parseLong(options.getOrDefault("reply-timeout-ms", "10000"));
        long maxNs = TimeUnit.MINUTES.toNanos(Long.parseLong(options.getOrDefault("max-minutes", "20")));
        long seed = Long.parseLong(options.getOrDefault("seed", "7"));
        Path results = Path.of(options.getOrDefault("results", "bench/RESULTS.md"));
        String machine = Machine.describe();
        String load = Machine.loadAverages();
        // reap after 5 s without a PING, 1 s after a worker's connection closed: a killed worker goes quickly, a busy live one stays
        String[] flags = {"--l1-size-gb", poolGb, "--test-liveness-floor-seconds", "1", "--worker-reap-timeout-seconds", "5",
            "--worker-registration-grace-seconds", "5", "--worker-disconnect-grace-seconds", "1"};
        try (ServerProcess server = ServerProcess.start(flags)) {
            SoakBench bench = new SoakBench(server.endpoint(), replyTimeoutMs, seed);
            ServerSample before = ServerSample.take(server);
            Machine.CpuSample cpuBefore = Machine.CpuSample.take(ProcessHandle.current().pid(), server.pid());
            long startNs = System.nanoTime();
            List<Slot> slots = new ArrayList<>();
            for (int i = 0; i < clients; i++) {
                Slot slot = new Slot(i, roundTrips);
                bench.launch(slot);
                slots.add(slot);
            }
            int killed = bench.drive(slots, clients * roundTrips, kills, startNs + maxNs);
            long elapsedNs = System.nanoTime() - startNs;
            double foreign = Machine.CpuSample.take(ProcessHandle.current().pid(), server.pid()).foreignCoresSince(cpuBefore);
            // the reaper's bound: 1 s disconnect grace plus a scan; 30 s only keeps a broken reaper from hanging the run
            long reapDeadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (Http.metric(server, "lmcache_mp_reaped_workers_total") < killed && System.nanoTime() < reapDeadlineNs) {
                Thread.sleep(100);
            }
            ServerSample after = ServerSample.take(server);
            double heapAfterGc = ServerMemory.heapAfterFullGc(server);
            int registered = JSON.readTree(Http.get(server.httpBase() + "/status").body()).get("registered_gpu_ids").size();
            String fresh;
            try (TestClient client = new TestClient(server.endpoint())) {
                fresh = client.call(21).payloadHex();
            }
            String command = ("bench/run-soak.sh " + String.join(" ", args)).trim();
            String md = bench.report(new ServerStates(before, after, heapAfterGc, server.isAlive() && "cd0100".equals(fresh)),
                    new Machine.Run(command, machine, load, foreign), new Plan(clients, roundTrips, kills, poolGb), killed, registered, elapsedNs);
            System.out.println(md);
            ResultsFile.writeSection(results, "soak", md);
            System.out.println("# written to " + results);
        }
    }

    private void launch(Slot slot) throws IOException {
        slot.instanceId = nextInstanceId++;
        slot.ready = false;
        slot.done = false;
        slot.last = "";
        List<String> command = List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(), "--enable-native-access=ALL-UNNAMED",
                "--sun-misc-unsafe-memory-access=allow", "-Xmx96m", "-XX:+UseSerialGC", "@bench/target/classpath.args",
                SoakWorker.class.getName(), endpoint, Long.toString(slot.instanceId), Long.toString(slot.remaining),
                Long.toString(random.nextLong()), Long.toString(replyTimeoutMs));
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        slot.process = process;
        started++;
        BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        // runs on: soak-reader-<slot>
        Thread reader = new Thread(() -> {
            try {
                String line;
                while ((line = out.readLine()) != null) {
                    if (line.equals("READY")) {
                        slot.ready = true;
                    } else if (line.startsWith("P ")) {
                        slot.last = line.substring(2);
                    } else if (line.startsWith("DONE ")) {
                        slot.last = line.substring(5);
                        slot.done = true;
                    } else {
                        System.err.println("[worker " + slot.index + "/" + process.pid() + "] " + line);
                    }
                }
            } catch (IOException e) {
                // the process ended
            }
        }, "soak-reader-" + slot.index);
        reader.setDaemon(true);
        reader.start();
    }

    /** Runs every slot to its end, killing one worker at each of {@code kills} evenly spaced points of the progress; returns the kills. */
    private int drive(List<Slot> slots, long all, int kills, long deadlineNs) throws Exception {
        int killed = 0;
        List<Slot> live = new ArrayList<>(slots);
        while (!live.isEmpty()) {
            if (System.nanoTime() > deadlineNs) {
                System.err.println("--max-minutes reached: stopping the workers left");
                for (Slot slot : live) {
                    slot.process.destroyForcibly().waitFor();
                    total.add(SoakWorker.Counts.parse(slot.last));
                }
                break;
            }
            long progress = total.get("round_trips");
            for (Slot slot : live) {
                progress += slot.last.isEmpty() ? 0 : SoakWorker.Counts.parse(slot.last).get("round_trips");
            }
            if (killed < kills && progress >= all * (killed + 1) / (kills + 1)) {
                List<Slot> candidates = live.stream().filter(s -> s.ready && !s.done && s.process.isAlive()).toList();
                if (!candidates.isEmpty()) {
                    kill(candidates.get(random.nextInt(candidates.size())));
                    killed++;
                }
            }
            for (Slot slot : List.copyOf(live)) {
                if (!slot.process.isAlive()) {
                    slot.process.waitFor();
                    Thread.sleep(50); // the reader's last line
                    if (!slot.done) {
                        throw new IllegalStateException("worker " + slot.index + " (pid " + slot.process.pid() + ") exited with "
                                + slot.process.exitValue() + " before it was done");
                    }
                    total.add(SoakWorker.Counts.parse(slot.last));
                    live.remove(slot);
                }
            }
            Thread.sleep(100);
        }
        return killed;
    }

    /** SIGKILL, as a crashing vLLM worker dies; its segments stay in /dev/shm (the server still maps them until the reaper frees them). */
    private void kill(Slot slot) throws Exception {
        slot.process.destroyForcibly().waitFor();
        SoakWorker.Counts counts = SoakWorker.Counts.parse(slot.last);
        total.add(counts);
        slot.remaining -= counts.get("round_trips");
        System.err.println("killed worker " + slot.index + " (pid " + slot.process.pid() + ") after " + counts.get("round_trips")
                + " round trips; " + slot.remaining + " left to its successor");
        try (DirectoryStream<Path> segments = Files.newDirectoryStream(Path.of("/dev/shm"), "lmcache_kv_" + slot.process.pid() + "_jw*")) {
            for (Path segment : segments) {
                Files.deleteIfExists(segment);
            }
        }
        launch(slot);
    }

    /** What the soak was asked to do: worker processes, round trips each, workers to kill, and the pool's size. */
    private record Plan(int clients, long roundTrips, int kills, String poolGb) {}

    private String report(ServerStates server, Machine.Run run, Plan plan, int killed, int registered, long elapsedNs) {
        ServerSample before = server.before();
        ServerSample after = server.after();
        double heapAfterGc = server.heapAfterGc();
        boolean answering = server.answering();
        int clients = plan.clients();
        long roundTrips = plan.roundTrips();
        int kills = plan.kills();
        String poolGb = plan.poolGb();
        StringBuilder md = new StringBuilder();
        Machine.sectionHead(md, "Soak: workers storing and retrieving through eviction while some are killed", run);
        md.append(String.format("%d worker processes (`SoakWorker`, JVMs), each with 2 layers of FlashAttention NHD `[2, 48, 16, 2, 64]` bf16 in"
                + " shm, %d round trips (request sent, reply awaited) each, in cycles of STORE of a new 256-token prefix (256 KiB chunk"
                + " object), LOOKUP + QUERY_PREFETCH_STATUS, RETRIEVE of it into other blocks and RETRIEVE of one of the worker's 32 previous"
                + " prefixes, both compared by CRC32 with what was stored; PING every 200 ms. Pool `--l1-size-gb %s` (%.0f chunk objects),"
                + " so it evicts all the time. %d workers"
                + " were SIGKILLed at evenly spaced points of the progress (%d asked for) and replaced by new instances that did the"
                + " rest; server flags `--test-liveness-floor-seconds 1 --worker-reap-timeout-seconds 5"
                + " --worker-registration-grace-seconds 5 --worker-disconnect-grace-seconds 1`. A reply is lost when none comes within"
                + " %d ms. Took %.1f s; %d worker processes started.%n%n", clients, roundTrips, poolGb,
                Double.parseDouble(poolGb) * 4096, killed, kills, replyTimeoutMs, elapsedNs / 1e9, started));
        String evictions = "| L1 evictions (chunk objects) | " + after.delta(before, "lmcache_mp_l1_evicted_chunks_total") + " |\n";
        String reaped = "| workers killed / reaped | " + killed + " / " + after.delta(before, "lmcache_mp_reaped_workers_total") + " |\n";
        String errors = "| handler errors | " + after.delta(before, "lmcache_mp_handler_errors_total") + " |\n";
        String answers = "| answers a fresh client afterwards | " + (answering ? "yes" : "NO") + " |\n\n";
        // RESULTS.md keeps what the goal is judged on; every figure goes to results/current/soak.md
        md.append("| figure | value |\n|---|---:|\n");
        for (String name : List.of("lost", "late", "mismatches")) {
            md.append("| ").append(label(name)).append(" | ").append(total.get(name)).append(" |\n");
        }
        md.append(evictions).append(reaped).append(errors).append(answers);
        md.append(ResultsFile.DETAILS).append("\n\nEvery figure:\n\n| figure | value |\n|---|---:|\n");
        for (String name : SoakWorker.Counts.NAMES) {
            md.append("| ").append(label(name)).append(" | ").append(total.get(name)).append(" |\n");
        }
        md.append(evictions).append(reaped);
        md.append("| instances still registered at the end | ").append(registered).append(" |\n");
        md.append(errors);
        md.append("| server RSS before → after | ").append(before.rss()).append(" → ").append(after.rss()).append(" |\n");
        md.append("| heap used before → after | ").append(ServerSample.mib(before.heapBytes())).append(" → ")
                .append(ServerSample.mib(after.heapBytes())).append(" |\n");
        md.append("| heap used after a full GC (`jcmd GC.run`) | ").append(ServerSample.mib(heapAfterGc)).append(" |\n");
        md.append("| log growth | ").append(String.format("%.1f KiB", (after.logBytes() - before.logBytes()) / 1024.0)).append(" |\n");
        md.append(answers);
        md.append("Round trips of a killed worker count up to its last report (every 10 cycles), so a few are done twice. Requests in flight"
                + " when a worker was killed are not lost replies: nobody was left to receive them. A refused STORE or a RETRIEVE miss"
                + " is the pool evicting, not an error; a RETRIEVE that succeeds must return the stored bytes. RSS includes the pool.\n");
        return md.toString();
    }

    private static String label(String name) {
        return switch (name) {
            case "cycles" -> "cycles (STORE, LOOKUP, QUERY, RETRIEVE, RETRIEVE of an older prefix)";
            case "round_trips" -> "round trips (requests sent, PINGs included)";
            case "lost" -> "lost replies (no reply within the timeout)";
            case "late" -> "late replies (after their timeout)";
            case "mismatches" -> "checksum mismatches (or malformed replies)";
            case "stored" -> "STOREs accepted";
            case "store_refused" -> "STOREs refused (no room)";
            case "hits" -> "LOOKUP hits (QUERY = 1 chunk)";
            case "retrieved" -> "RETRIEVEs of the new prefix, succeeded";
            case "retrieve_missed" -> "RETRIEVEs of the new prefix, missed (evicted)";
            case "old_retrieved" -> "RETRIEVEs of an older prefix, succeeded";
            case "old_missed" -> "RETRIEVEs of an older prefix, missed (evicted)";
            default -> name;
        };
    }
}
