package io.lmcache.server.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/** The server's memory as the fuzz test and the flood and soak benchmarks bound and record it. */
public final class ServerMemory {
    private ServerMemory() {}

    /** Resident memory of the process (VmRSS of /proc/&lt;pid&gt;/status), in KiB; the pool's touched pages included. */
    public static long rssKib(long pid) {
        try {
            return Files.readAllLines(Path.of("/proc/" + pid + "/status")).stream().filter(l -> l.startsWith("VmRSS:"))
                    .map(l -> Long.parseLong(l.replaceAll("\\D", ""))).findFirst().orElse(-1L);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * Heap in use right after a full collection ({@code jcmd <pid> GC.run}, at most 30 s): what the server
     * really holds, the garbage a concurrent collector has not yet reclaimed aside. NaN when jcmd did not finish.
     */
    public static double heapAfterFullGc(ServerProcess server) {
        String java = System.getProperty("lmcache.test.java", Path.of(System.getProperty("java.home"), "bin", "java").toString());
        Path jcmd = Path.of(java).resolveSibling("jcmd");
        try {
            Process process = new ProcessBuilder(jcmd.toString(), Long.toString(server.pid()), "GC.run").redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                return Double.NaN;
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Double.NaN;
        }
        return Http.metric(server, "jvm_memory_used_bytes", "area", "heap");
    }
}
