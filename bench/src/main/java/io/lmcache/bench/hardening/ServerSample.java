package io.lmcache.bench.hardening;

import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.ServerMemory;
import io.lmcache.server.testing.ServerProcess;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;

/**
 * The server process as the flood and soak benchmarks record it: resident memory (VmRSS of
 * /proc/&lt;pid&gt;/status, the pool included), heap in use (Micrometer's JVM gauge), its log's size,
 * and one /metrics scrape to read counters from.
 */
record ServerSample(long rssKib, double heapBytes, long logBytes, String scrape) {
    static ServerSample take(ServerProcess server) {
        String scrape = Http.get(server.httpBase() + "/metrics").body();
        try {
            return new ServerSample(ServerMemory.rssKib(server.pid()), Http.metric(scrape, "jvm_memory_used_bytes", "area", "heap"),
                    Files.size(server.logFile()), scrape);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
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
