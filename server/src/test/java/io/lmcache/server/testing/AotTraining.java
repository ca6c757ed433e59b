package io.lmcache.server.testing;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The training run of the server's ahead-of-time cache (JEP 483, 514, 515), run by {@code bin/lmcache-aot-train}: starts
 * the server through the launcher with {@code LMCACHE_AOT_TRAINING=<cache>} (so the JVM it trains has exactly the flags and
 * class path the launcher gives every later start, which the cache must match), drives the request path with a CPU worker
 * in shared memory (REGISTER, then rounds of STORE, LOOKUP + QUERY_PREFETCH_STATUS, RETRIEVE, END_SESSION, PING, with 1 to
 * 4 chunks), and stops it with SIGTERM: the JVM writes the cache as it exits. Exits 0 when the cache file was written.
 *
 * <p>Usage: {@code AotTraining <launcher> <cache file> <rounds>}
 */
public final class AotTraining {
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(4, 128, 16, 4, 64);
    private static final int CHUNK_TOKENS = 256;
    private static final long EXIT_TIMEOUT_S = 300;

    private AotTraining() {}

    public static void main(String[] args) throws Exception {
        Path launcher = Path.of(args[0]);
        Path cache = Path.of(args[1]).toAbsolutePath();
        int rounds = Integer.parseInt(args[2]);
        int port;
        int httpPort;
        // both open at once: two different ports
        try (ServerSocket zmq = new ServerSocket(0); ServerSocket http = new ServerSocket(0)) {
            port = zmq.getLocalPort();
            httpPort = http.getLocalPort();
        }
        Path log = Files.createTempFile("lmcache-aot-training-", ".log");
        ProcessBuilder builder = new ProcessBuilder(launcher.toString(), "--host", "127.0.0.1", "--port", Integer.toString(port),
                "--http-host", "127.0.0.1", "--http-port", Integer.toString(httpPort), "--l1-size-gb", "0.25",
                "--shm-name", "lmcache_aot_training_" + ProcessHandle.current().pid()).redirectErrorStream(true).redirectOutput(log.toFile());
        builder.environment().put("LMCACHE_AOT_TRAINING", cache.toString());
        Files.deleteIfExists(cache);
        Process server = builder.start();
        try {
            awaitHealthy(server, httpPort, log);
            long startNs = System.nanoTime();
            drive("tcp://127.0.0.1:" + port, rounds);
            System.err.printf("lmcache-aot-train: %d rounds in %.1f s; the server writes the cache as it stops%n", rounds,
                    (System.nanoTime() - startNs) / 1e9);
        } catch (RuntimeException | AssertionError e) {
            server.destroyForcibly();
            fail("the training run failed: " + e, log);
        }
        server.destroy();
        if (!server.waitFor(EXIT_TIMEOUT_S, TimeUnit.SECONDS)) {
            server.destroyForcibly();
            fail("the server did not stop within " + EXIT_TIMEOUT_S + " s of SIGTERM", log);
        }
        if (server.exitValue() != 0 && server.exitValue() != 143 || !Files.isRegularFile(cache) || Files.size(cache) == 0) {
            fail("the server exited with " + server.exitValue() + " and no cache at " + cache, log);
        }
        Files.deleteIfExists(log);
    }

    /** The rounds: distinct prompts (the pool evicts the oldest), every other one retrieved after its lookup. */
    static void drive(String endpoint, int rounds) {
        try (JavaWorker worker = new JavaWorker(endpoint, 7001, "aot-training/model", GEOMETRY)) {
            worker.register();
            int blocksPerChunk = CHUNK_TOKENS / GEOMETRY.blockSize();
            for (int round = 0; round < rounds; round++) {
                int chunks = 1 << (round % 3);
                int[] blocks = JavaWorker.range((round * blocksPerChunk) % (GEOMETRY.blocks() - 4 * blocksPerChunk), chunks * blocksPerChunk);
                int[] tokens = JavaWorker.tokens(round, chunks * CHUNK_TOKENS);
                String request = "aot-" + round;
                if (round % 50 == 0) {
                    worker.stamp(blocks, round);
                }
                worker.store(tokens, 0, tokens.length, blocks, request);
                int hit = worker.lookup(tokens, tokens.length, request, 1, 1);
                if (hit > 0) {
                    worker.retrieve(tokens, 0, hit * CHUNK_TOKENS, blocks, 0, request);
                }
                worker.endSession(request);
                worker.ping();
            }
        }
    }

    private static void awaitHealthy(Process server, int httpPort, Path log) throws IOException, InterruptedException {
        HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(1)).build();
        HttpRequest health = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + httpPort + "/healthcheck"))
                .timeout(Duration.ofSeconds(2)).GET().build();
        long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (true) {
            if (!server.isAlive()) {
                fail("the server exited with " + server.exitValue() + " before it was healthy", log);
            }
            try {
                if (http.send(health, HttpResponse.BodyHandlers.discarding()).statusCode() == 200) {
                    return;
                }
            } catch (IOException e) {
                // not listening yet
            }
            if (System.nanoTime() - deadlineNs > 0) {
                server.destroyForcibly();
                fail("the server was not healthy within 120 s", log);
            }
            TimeUnit.MILLISECONDS.sleep(50);
        }
    }

    private static void fail(String why, Path log) throws IOException {
        List<String> lines = Files.readAllLines(log);
        System.err.println("lmcache-aot-train: " + why + "; the end of the server's log:");
        lines.subList(Math.max(0, lines.size() - 40), lines.size()).forEach(System.err::println);
        // printed: nothing is left behind in the temporary directory
        Files.deleteIfExists(log);
        System.exit(1);
    }
}
