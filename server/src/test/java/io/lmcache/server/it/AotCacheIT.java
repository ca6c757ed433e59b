package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.protocol.testing.Golden;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.Processes;
import io.lmcache.server.testing.ServerProcess;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The ahead-of-time cache through {@code bin/lmcache-server} (issue 30): a cache trained by bin/lmcache-aot-train (a short
 * training, 40 rounds) is used and /status says so; a damaged file (its header or its body), or a cache made for another
 * class path, is refused by the JVM and the server starts and serves without it, /status saying it was not used.
 */
class AotCacheIT {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(2, 32, 16, 2, 64);

    @TempDir
    static Path dir;

    private static Path trained;

    @BeforeAll
    static void train() {
        trained = dir.resolve("trained.aot");
        ProcessBuilder builder = new ProcessBuilder(Golden.repoRoot().resolve("bin/lmcache-aot-train").toString(), trained.toString());
        builder.environment().put("JAVA_HOME", javaHome().toString());
        builder.environment().put("LMCACHE_AOT_TRAINING_ROUNDS", "40");
        Processes.Result result = Processes.run(builder, Duration.ofSeconds(240));
        assertEquals(0, result.exitCode(), result.stderr());
        assertTrue(Files.isRegularFile(trained), result.stderr());
    }

    @Test
    void aTrainedCacheIsUsed() throws Exception {
        JsonNode aot = startServeAndReadAotStatus(trained);
        assertTrue(aot.path("used").asBoolean(), aot.toString());
        assertEquals(trained.toString(), aot.path("file").asText());
        assertEquals("auto", aot.path("mode").asText());
        assertFalse(aot.path("training").asBoolean());
    }

    @Test
    void aDamagedCacheIsRefusedAndTheServerServesWithoutIt() throws Exception {
        Path damaged = dir.resolve("damaged.aot");
        byte[] noise = new byte[1 << 20];
        new Random(30).nextBytes(noise);
        Files.write(damaged, noise);
        JsonNode aot = startServeAndReadAotStatus(damaged);
        assertFalse(aot.path("used").asBoolean(), aot.toString());
        assertEquals(damaged.toString(), aot.path("file").asText());
    }

    /**
     * Damage inside the cache's body (issue 45 N7), not its header: without a check the JVM maps it and crashes at start, or
     * runs on wrong classes. The launcher has the JVM verify the cache's checksums (-XX:+VerifySharedSpaces), so it refuses
     * the cache and the server serves without it, saying so in its log in the configured format (here JSON lines).
     */
    @Test
    void aCacheDamagedInItsBodyIsRefusedAndTheServerServesWithoutItSayingSoInItsLog() throws Exception {
        Path damaged = dir.resolve("body-damaged.aot");
        byte[] bytes = Files.readAllBytes(trained);
        byte[] noise = new byte[4096];
        new Random(45).nextBytes(noise);
        System.arraycopy(noise, 0, bytes, bytes.length / 2, noise.length);
        Files.write(damaged, bytes);
        Started started = startServeAndReadAotStatus(damaged, Map.of("LMCACHE_LOG_FORMAT", "json"));
        assertFalse(started.aot().path("used").asBoolean(), started.aot().toString());
        assertEquals(damaged.toString(), started.aot().path("file").asText());
        boolean said = false;
        for (String line : started.output().lines().filter(line -> !line.isBlank()).toList()) {
            JsonNode event = JSON.readTree(line);
            said |= event.path("level").asText().equals("WARN")
                    && event.path("formattedMessage").asText().contains("the ahead-of-time cache " + damaged + " was refused");
        }
        assertTrue(said, "every line is JSON, the refusal among them:\n" + started.output());
    }

    @Test
    void aCacheOfAnotherClassPathIsRefusedAndTheServerServesWithoutIt() throws Exception {
        // a real cache, of the same runtime, recorded by a JVM whose class path starts with the test jar, not the server's jar
        Path other = dir.resolve("other-classpath.aot");
        Path target = Path.of(System.getProperty("lmcache.server.jar")).getParent();
        ProcessBuilder builder = new ProcessBuilder(System.getProperty("lmcache.test.java"), "-XX:AOTCacheOutput=" + other, "-cp",
                target.resolve("lmcache-server-tests.jar") + ":" + target.resolve("lmcache-server.jar"), "io.lmcache.server.Main", "--version");
        Processes.Result result = Processes.run(builder, Duration.ofSeconds(120));
        assertEquals(0, result.exitCode(), result.stderr());
        assertTrue(Files.isRegularFile(other), result.stdout() + result.stderr());
        JsonNode aot = startServeAndReadAotStatus(other);
        assertFalse(aot.path("used").asBoolean(), aot.toString());
    }

    /** What a start said: /status's aot_cache, and the launcher's and server's output. */
    private record Started(JsonNode aot, String output) {}

    private static JsonNode startServeAndReadAotStatus(Path cache) throws Exception {
        return startServeAndReadAotStatus(cache, Map.of()).aot();
    }

    /**
     * Starts the server through the launcher with {@code cache} (and {@code env}), stores and finds a chunk, and returns
     * /status's aot_cache with the output. A port another process took first (exit 2, "cannot bind") is chosen again.
     */
    private static Started startServeAndReadAotStatus(Path cache, Map<String, String> env) throws Exception {
        for (int attempt = 1; ; attempt++) {
            int port = ServerProcess.freePort();
            int httpPort = ServerProcess.freePort();
            Path log = Files.createTempFile(dir, "server-", ".log");
            ProcessBuilder builder = new ProcessBuilder(Golden.repoRoot().resolve("bin/lmcache-server").toString(), "--host", "127.0.0.1",
                    "--port", Integer.toString(port), "--http-host", "127.0.0.1", "--http-port", Integer.toString(httpPort), "--l1-size-gb",
                    "0.25", "--shm-name", "").redirectErrorStream(true).redirectOutput(log.toFile());
            builder.environment().putAll(Map.of("JAVA_HOME", javaHome().toString(), "LMCACHE_AOT_CACHE", cache.toString(),
                    "LMCACHE_AOT_TRAIN", "0"));
            builder.environment().putAll(env);
            Process server = builder.start();
            try {
                try {
                    await("ready").atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(100)).until(() -> {
                        if (!server.isAlive()) {
                            throw new AssertionError("the server exited with " + server.exitValue() + ":\n" + Files.readString(log));
                        }
                        return healthy(httpPort);
                    });
                } catch (AssertionError e) {
                    if (attempt < 3 && !server.isAlive() && server.exitValue() == 2 && Files.readString(log).contains("cannot bind")) {
                        continue;
                    }
                    throw e;
                }
                try (JavaWorker worker = new JavaWorker("tcp://127.0.0.1:" + port, 3001, "aot/model", GEOMETRY)) {
                    worker.register();
                    int[] blocks = JavaWorker.range(0, 16);
                    int[] tokens = JavaWorker.tokens(30, 256);
                    worker.fill(blocks, 30);
                    assertTrue(worker.store(tokens, 0, 256, blocks, "aot-it"), Files.readString(log));
                    assertEquals(1, worker.lookup(tokens, 256, "aot-it", 1, 1));
                    return new Started(JSON.readTree(Http.get("http://127.0.0.1:" + httpPort + "/status").body()).path("aot_cache"),
                            Files.readString(log));
                }
            } finally {
                server.destroy();
                if (!server.waitFor(30, TimeUnit.SECONDS)) {
                    server.destroyForcibly();
                }
            }
        }
    }

    private static boolean healthy(int httpPort) {
        try {
            return Http.get("http://127.0.0.1:" + httpPort + "/healthcheck").statusCode() == 200;
        } catch (RuntimeException e) {
            return false;
        }
    }

    private static Path javaHome() {
        return Path.of(System.getProperty("lmcache.test.java")).getParent().getParent();
    }
}
