package io.lmcache.bench.hardening;

import io.lmcache.bench.Machine;
import io.lmcache.bench.ResultsFile;
import io.lmcache.server.testing.FuzzRun;
import io.lmcache.server.testing.MalformedMessages.Outcome;
import io.lmcache.server.testing.ServerMemory;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * The flood: FuzzIT's mix of malformed messages (MalformedMessages, FuzzRun) at 10^6 against a
 * server of the default test size, a real client checking its replies meanwhile; records the
 * messages, replies owed and received, RSS, heap, log growth and counters in bench/RESULTS.md.
 *
 * <p>Usage: {@code FloodBench [--messages 1000000] [--connections 8] [--window 64] [--seed 13]
 * [--results bench/RESULTS.md]}
 */
public final class FloodBench {
    private FloodBench() {}

    static Map<String, String> options(String[] args) {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --name value, got " + args[i]);
            }
            options.put(args[i].substring(2), args[i + 1]);
        }
        return options;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> options = options(args);
        long messages = Long.parseLong(options.getOrDefault("messages", "1000000"));
        int connections = Integer.parseInt(options.getOrDefault("connections", "8"));
        int window = Integer.parseInt(options.getOrDefault("window", "64"));
        long seed = Long.parseLong(options.getOrDefault("seed", "13"));
        Path results = Path.of(options.getOrDefault("results", "bench/RESULTS.md"));
        String machine = Machine.describe();
        String load = Machine.loadAverages();
        try (ServerProcess server = ServerProcess.start()) {
            ServerSample before = ServerSample.take(server);
            Machine.CpuSample cpuBefore = Machine.CpuSample.take(ProcessHandle.current().pid(), server.pid());
            FuzzRun.Tally tally = FuzzRun.run(new FuzzRun.Options(server.endpoint(), messages, connections, seed, window, Duration.ofSeconds(10)));
            double foreign = Machine.CpuSample.take(ProcessHandle.current().pid(), server.pid()).foreignCoresSince(cpuBefore);
            ServerSample after = ServerSample.take(server);
            double heapAfterGc = ServerMemory.heapAfterFullGc(server);
            String fresh;
            try (TestClient client = new TestClient(server.endpoint())) {
                fresh = client.call(21).payloadHex();
            }
            String md = report(tally, new ServerStates(before, after, heapAfterGc, server.isAlive() && "cd0100".equals(fresh)),
                    new Machine.Run(("bench/run-flood.sh " + String.join(" ", args)).trim(), machine, load, foreign), connections, window, seed);
            System.out.println(md);
            ResultsFile.writeSection(results, "flood", md);
            System.out.println("# written to " + results);
            if (!tally.problems().isEmpty()) {
                System.err.println("problems: " + String.join("\n  ", tally.problems()));
                System.exit(1);
            }
        }
    }

    private static String report(FuzzRun.Tally t, ServerStates server, Machine.Run run, int connections, int window, long seed) {
        ServerSample before = server.before();
        ServerSample after = server.after();
        double heapAfterGc = server.heapAfterGc();
        boolean answering = server.answering();
        StringBuilder md = new StringBuilder();
        Machine.sectionHead(md, "Flood: malformed messages against a running server", run);
        md.append(String.format("%d malformed messages from %d DEALERs (seed %d, each pipelining windows of %d and then awaiting the replies"
                + " owed), interleaved with a real client's PING, GET_CHUNK_SIZE and LOOKUP (empty cache) in batches of 30, every reply"
                + " compared byte for byte. Server: test defaults (`--l1-size-gb 0.25`, `-Xmx512m`, ZGC). The mix is FuzzIT's"
                + " (`MalformedMessages`): %s. Took %.1f s (%.0f messages/s, %d MiB sent).%n%n", t.sent(), connections, seed, window,
                t.byKind().entrySet().stream().map(e -> e.getKey() + " " + e.getValue()).collect(Collectors.joining(", ")),
                t.elapsedNs() / 1e9, t.sent() / (t.elapsedNs() / 1e9), t.bytesSent() >> 20));
        md.append("| figure | value |\n|---|---:|\n");
        row(md, "messages sent", t.sent());
        row(md, "replies owed to the fuzz connections (served ops)", t.repliesExpected());
        row(md, "replies received by them", t.repliesReceived());
        row(md, "lost replies (fuzz connections)", t.lostReplies());
        row(md, "replies matching no message sent", t.unexpectedReplies());
        row(md, "real client: requests", t.checkerRequests());
        row(md, "real client: lost replies", t.checkerLost());
        row(md, "real client: replies not byte-exact", t.checkerMismatches());
        md.append("| answers a fresh client afterwards | ").append(answering ? "yes" : "NO").append(" |\n\n");
        md.append(t.problems().isEmpty() ? "No problems.\n\n" : "Problems: " + String.join("; ", t.problems()) + "\n\n");
        md.append(ResultsFile.DETAILS).append("\n\n");
        md.append("| memory and log | value |\n|---|---:|\n");
        md.append("| server RSS before → after | ").append(before.rss()).append(" → ").append(after.rss()).append(" |\n");
        md.append("| heap used before → after | ").append(ServerSample.mib(before.heapBytes())).append(" → ")
                .append(ServerSample.mib(after.heapBytes())).append(" |\n");
        md.append("| heap used after a full GC (`jcmd GC.run`) | ").append(ServerSample.mib(heapAfterGc)).append(" |\n");
        md.append("| log growth | ").append(String.format("%.1f KiB", (after.logBytes() - before.logBytes()) / 1024.0)).append(" |\n\n");
        md.append("Counters (growth during the run) against what the messages call for:\n\n");
        md.append("| counter | grew by | expected |\n|---|---:|---:|\n");
        counter(md, after, before, "bad_requests{reason=fewer_than_3_frames}", String.valueOf(t.count(Outcome.SHORT)),
                "lmcache_mp_bad_requests_total", "reason", "fewer_than_3_frames");
        counter(md, after, before, "unknown_ops", String.valueOf(t.count(Outcome.UNKNOWN_OP)), "lmcache_mp_unknown_ops_total");
        counter(md, after, before, "unsupported_ops", String.valueOf(t.count(Outcome.UNSUPPORTED)), "lmcache_mp_unsupported_ops_total");
        counter(md, after, before, "bad_requests{reason=pickle_rejected}", String.valueOf(t.count(Outcome.PICKLE_REJECTED)),
                "lmcache_mp_bad_requests_total", "reason", "pickle_rejected");
        long certain = t.count(Outcome.DECODE_FAILS) + t.count(Outcome.PICKLE_REJECTED) + t.count(Outcome.BAD_EXTENSION);
        long decodeFailures = after.delta(before, "lmcache_mp_bad_requests_total")
                - after.delta(before, "lmcache_mp_bad_requests_total", "reason", "fewer_than_3_frames");
        md.append("| bad_requests, every other reason | ").append(decodeFailures).append(" | ").append(certain).append(" to ")
                .append(certain + t.count(Outcome.REPLY)).append(" |\n");
        for (String reason : new String[] {"malformed_msgpack", "wrong_type", "missing_frames", "oversized", "bad_extension", "bad_pickle",
            "bad_value"}) {
            counter(md, after, before, "  of which " + reason, "", "lmcache_mp_bad_requests_total", "reason", reason);
        }
        counter(md, after, before, "handler_errors", "0", "lmcache_mp_handler_errors_total");
        counter(md, after, before, "log_lines{level=warn}", "", "lmcache_mp_log_lines_total", "level", "warn");
        counter(md, after, before, "log_suppressed_lines", "", "lmcache_mp_log_suppressed_lines_total");
        md.append("\n\"expected\" for bad_requests is a range: random frames and depth bombs of a served op may or may not decode"
                + " (either way they are answered). RSS includes the 0.25 GiB pool.\n");
        return md.toString();
    }

    private static void row(StringBuilder md, String name, long value) {
        md.append("| ").append(name).append(" | ").append(value).append(" |\n");
    }

    private static void counter(StringBuilder md, ServerSample after, ServerSample before, String label, String expected, String name,
            String... labels) {
        md.append("| ").append(label).append(" | ").append(after.delta(before, name, labels)).append(" | ").append(expected).append(" |\n");
    }
}
