package io.lmcache.bench.hardening;

import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.ServerProcess;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * The server process as the flood and soak benchmarks record it: resident memory (VmRSS of
 * /proc/&lt;pid&gt;/status, the pool included), heap in use (Micrometer's JVM gauge), its log's size,
 * and one /metrics scrape to read counters from.
 */
record ServerSample(long rssKib, double heapBytes, long logBytes, String scrape) {
    static ServerSample take(ServerProcess server) {
        String scrape = Http.get(server.httpBase() + "/metrics").body();
        try {
            long rss = Files.readAllLines(Path.of("/proc/" + server.pid() + "/status")).stream().filter(l -> l.startsWith("VmRSS:"))
                    .map(l -> Long.parseLong(l.replaceAll("\\D", ""))).findFirst().orElse(-1L);
            return new ServerSample(rss, Http.metric(scrape, "jvm_memory_used_bytes", "area", "heap"), Files.size(server.logFile()), scrape);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Heap in use right after a full collection ({@code jcmd <pid> GC.run}): what the server really holds, garbage aside. */
    static double heapAfterFullGc(ServerProcess server) throws IOException, InterruptedException {
        Process jcmd = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "jcmd").toString(), Long.toString(server.pid()),
                "GC.run").redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        if (!jcmd.waitFor(30, TimeUnit.SECONDS)) {
            jcmd.destroyForcibly();
            return Double.NaN;
        }
        return Http.metric(server, "jvm_memory_used_bytes", "area", "heap");
    }

    double metric(String name, String... labels) {
        return Http.metric(scrape, name, labels);
    }

    /** A counter's growth from {@code before} to this sample. */
    long delta(ServerSample before, String name, String... labels) {
        return Math.round(metric(name, labels) - before.metric(name, labels));
    }

    static String mib(double bytes) {
        return String.format("%.1f MiB", bytes / 1048576.0);
    }

    String rss() {
        return String.format("%.1f MiB", rssKib / 1024.0);
    }
}
