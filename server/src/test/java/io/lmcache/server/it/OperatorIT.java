package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.protocol.testing.Golden;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.Processes;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * What an operator touches: the launchers run through symbolic links from another directory as the
 * image runs them ({@code /usr/local/bin/lmcache-server}, {@code /opt/venv/bin/lmcache}), LMCache's
 * {@code lmcache server}/{@code ping}/{@code describe}/{@code completion}, the image's bash health
 * check, JSON logs and an operator's own logback file, the pool file's mode, {@code /version}.
 */
@ExtendWith(ServerLogOnFailure.class)
class OperatorIT {
    private static final Path ROOT = Golden.repoRoot();
    private static final ObjectMapper JSON = new ObjectMapper();

    /** A launcher process (bash execs java, so this is the server) with its output in a file. */
    private record Launched(Process process, Path log, int httpPort) implements AutoCloseable {
        String output() {
            try {
                return Files.readString(log);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        void awaitHealthy() {
            await("/healthcheck answers 200").atMost(Duration.ofSeconds(90)).pollInterval(Duration.ofMillis(200)).until(() -> {
                assertTrue(process.isAlive(), () -> "the launcher exited " + process.exitValue() + ":\n" + output());
                try {
                    return Http.get("http://127.0.0.1:" + httpPort + "/healthcheck").statusCode() == 200;
                } catch (UncheckedIOException e) {
                    return false;
                }
            });
        }

        @Override
        public void close() throws InterruptedException {
            process.destroy();
            if (!process.waitFor(30, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
        }
    }

    private static Map<String, String> javaEnv() {
        Map<String, String> env = new HashMap<>();
        env.put("JAVA_HOME", Path.of(System.getProperty("lmcache.test.java")).getParent().getParent().toString());
        return env;
    }

    /**
     * Launches with the arguments {@code args} makes of a free HTTP port and waits until it is healthy; a port another
     * process took before the server bound it (exit 2, "cannot bind") is chosen again, a few times.
     */
    private static Launched launchHealthy(Path executable, Path cwd, Map<String, String> env, IntFunction<List<String>> args)
            throws Exception {
        for (int attempt = 1; ; attempt++) {
            Launched server = launch(executable, cwd, env, args.apply(ServerProcess.freePort()));
            try {
                server.awaitHealthy();
                return server;
            } catch (RuntimeException | AssertionError e) {
                server.close();
                if (attempt < 3 && server.process().exitValue() == 2 && server.output().contains("cannot bind")) {
                    continue;
                }
                throw e;
            }
        }
    }

    private static Launched launch(Path executable, Path cwd, Map<String, String> env, List<String> args) throws IOException {
        List<String> command = new ArrayList<>(List.of(executable.toString()));
        command.addAll(args);
        int httpPort = Integer.parseInt(args.get(args.indexOf("--http-port") + 1));
        // in the test's own temporary directory, which JUnit deletes
        Path log = Files.createTempFile(cwd, "launcher", ".log");
        ProcessBuilder builder = new ProcessBuilder(command).directory(cwd.toFile()).redirectErrorStream(true).redirectOutput(log.toFile());
        builder.environment().putAll(javaEnv());
        builder.environment().putAll(env);
        return new Launched(builder.start(), log, httpPort);
    }

    private static List<String> serverArgs(int httpPort, String... more) {
        List<String> args = new ArrayList<>(List.of("--host", "127.0.0.1", "--port", Integer.toString(ServerProcess.freePort()),
                "--http-host", "127.0.0.1", "--http-port", Integer.toString(httpPort), "--l1-size-gb", "0.0625",
                "--shm-name", "lmcache_operator_it_" + httpPort));
        args.addAll(List.of(more));
        return args;
    }

    private static Processes.Result run(Path cwd, Map<String, String> env, String... command) {
        ProcessBuilder builder = new ProcessBuilder(command).directory(cwd.toFile());
        builder.environment().putAll(javaEnv());
        builder.environment().putAll(env);
        return Processes.run(builder, Duration.ofSeconds(120));
    }

    @Test
    void theImagesEntryPointServesThroughALinkOnPathFromAnotherDirectory(@TempDir Path dir) throws Exception {
        // as the Dockerfile lays it out: /usr/local/bin/lmcache-server -> /opt/lmcache-server/bin/lmcache-server, WORKDIR elsewhere
        Path usrLocalBin = Files.createDirectories(dir.resolve("usr/local/bin"));
        Files.createSymbolicLink(usrLocalBin.resolve("lmcache-server"), ROOT.resolve("bin/lmcache-server"));
        Path elsewhere = Files.createDirectories(dir.resolve("work"));
        int httpPort;
        try (Launched server = launchHealthy(usrLocalBin.resolve("lmcache-server"), elsewhere, Map.of(), OperatorIT::serverArgs)) {
            httpPort = server.httpPort();
            // the image's HEALTHCHECK: bash alone, the port read from the server's own command line
            Processes.Result health = run(elsewhere, Map.of("LMCACHE_PID", Long.toString(server.process().pid())),
                    ROOT.resolve("bin/lmcache-healthcheck").toString());
            assertEquals(0, health.exitCode(), health.stdout() + health.stderr());
            assertEquals("healthy", health.stdout().strip());
        }
        Processes.Result down = run(elsewhere, Map.of("LMCACHE_PID", "999999999", "LMCACHE_HTTP_PORT", Integer.toString(httpPort)),
                ROOT.resolve("bin/lmcache-healthcheck").toString());
        assertEquals(1, down.exitCode(), "nothing listens any more: " + down.stdout());
    }

    @Test
    void lmcacheServerTakesLmcachesFlagsThroughTheVenvLinkAndPingAndDescribeReadIt(@TempDir Path dir) throws Exception {
        Path venvBin = Files.createDirectories(dir.resolve("opt/venv/bin"));
        Path lmcache = Files.createSymbolicLink(venvBin.resolve("lmcache"), ROOT.resolve("bin/lmcache"));
        String url;
        try (Launched server = launchHealthy(lmcache, dir, Map.of(), httpPort -> {
            List<String> args = new ArrayList<>(List.of("server"));
            args.addAll(serverArgs(httpPort, "--no-l1-use-lazy", "--disable-observability", "--eviction-policy", "LRU"));
            return args;
        })) {
            url = "http://127.0.0.1:" + server.httpPort();
            assertTrue(server.output().contains("--no-l1-use-lazy is accepted for compatibility with LMCache and has no effect here"),
                    server.output());
            Processes.Result ping = run(dir, Map.of(), lmcache.toString(), "ping", "kvcache", "--url", url);
            assertEquals(0, ping.exitCode(), ping.stdout() + ping.stderr());
            assertTrue(ping.stdout().contains("Status:") && ping.stdout().contains("OK"), ping.stdout());
            Processes.Result describe = run(dir, Map.of(), lmcache.toString(), "describe", "kvcache", "--url", url, "--format", "json");
            assertEquals(0, describe.exitCode(), describe.stderr());
            JsonNode metrics = JSON.readTree(describe.stdout()).get("metrics");
            assertEquals("OK", metrics.get("health").asText());
            assertEquals("LRU", metrics.get("eviction_policy").asText(), "read from storage_manager.eviction_controller");
            assertEquals(256, metrics.get("chunk_size").asInt());
            assertEquals(0.06, metrics.get("l1_capacity_gb").asDouble(), 0.001);
            Processes.Result terminal = run(dir, Map.of(), lmcache.toString(), "describe", "kvcache", "--url", url);
            assertTrue(terminal.stdout().lines().anyMatch(line -> line.matches("Eviction policy: +LRU")), terminal.stdout());
        }
        Processes.Result refused = run(dir, Map.of(), lmcache.toString(), "ping", "kvcache", "--url", url);
        assertEquals(1, refused.exitCode(), "the server is gone: " + refused.stdout());
        assertTrue(refused.stdout().contains("FAIL") && refused.stderr().contains("Cannot connect"), refused.stdout() + refused.stderr());
        Processes.Result usage = run(dir, Map.of(), lmcache.toString(), "ping", "engine");
        assertEquals(2, usage.exitCode(), "this server has no engine to ping: " + usage.stderr());
        Processes.Result unsupported = run(dir, Map.of(), lmcache.toString(), "server", "--l1-size-gb", "1", "--gds-l1-path", "/mnt/gds");
        assertEquals(2, unsupported.exitCode());
        assertTrue(unsupported.stderr().contains("--gds-l1-path: GPUDirect Storage as L1 memory is not supported by lmcache-server"),
                unsupported.stderr());
    }

    @Test
    void shellCompletionCoversBothCommandsAndIsValidBash(@TempDir Path dir) throws Exception {
        Processes.Result completion = run(dir, Map.of(), ROOT.resolve("bin/lmcache").toString(), "completion");
        assertEquals(0, completion.exitCode(), completion.stderr());
        String script = completion.stdout();
        assertTrue(script.contains("complete -F") && script.contains(" lmcache") && script.contains(" lmcache-server"), script);
        assertTrue(script.contains("--l1-size-gb") && script.contains("describe") && script.contains("--eviction-policy"));
        Path file = dir.resolve("lmcache.bash");
        Files.writeString(file, script);
        Processes.Result syntax = Processes.run(new ProcessBuilder("bash", "-n", file.toString()), Duration.ofSeconds(30));
        assertEquals(0, syntax.exitCode(), syntax.stderr());
    }

    @Test
    void jsonLogsAndAnOperatorsOwnLogbackFile(@TempDir Path dir) throws Exception {
        try (Launched server = launchHealthy(ROOT.resolve("bin/lmcache-server"), dir, Map.of("LMCACHE_LOG_FORMAT", "json"),
                OperatorIT::serverArgs)) {
            List<JsonNode> events = jsonLines(server.output());
            assertTrue(events.size() >= 3, server.output());
            assertTrue(events.stream().anyMatch(event -> event.get("formattedMessage").asText().startsWith("ready: ZeroMQ ROUTER")),
                    "every line is a JSON object, the ready line among them:\n" + server.output());
        }
        Path config = dir.resolve("logback.xml");
        Path own = dir.resolve("own.log");
        Files.writeString(config, """
                <configuration>
                  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
                    <file>%s</file>
                    <encoder><pattern>OPERATOR %%level %%msg%%n</pattern></encoder>
                  </appender>
                  <root level="INFO"><appender-ref ref="FILE"/></root>
                </configuration>
                """.formatted(own));
        try (Launched server = launchHealthy(ROOT.resolve("bin/lmcache-server"), dir, Map.of("LMCACHE_JAVA_OPTS",
                "-Dlogback.configurationFile=" + config), httpPort -> serverArgs(httpPort, "--disable-logging"))) {
            int httpPort = server.httpPort();
            String text = Files.readString(own);
            assertTrue(text.contains("OPERATOR INFO ready: ZeroMQ ROUTER"), text);
            assertTrue(text.contains("OPERATOR WARN --disable-logging is accepted"), text);
            assertTrue(!server.output().contains("LMCache INFO"), "the default console appender is gone:\n" + server.output());
            assertTrue(Http.metric(Http.get("http://127.0.0.1:" + httpPort + "/metrics").body(), "lmcache_mp_log_lines_total", "level", "warn") >= 1,
                    "the log-line counters stay attached");
        }
    }

    /**
     * The README's order: the first start trains the ahead-of-time cache, then the tests rebuild the jar. The launcher removes
     * the cache it finds older than the jar, and says so through the server's log (here JSON lines), not as plain text.
     */
    @Test
    void aStaleAheadOfTimeCacheIsRemovedAndSaidInTheConfiguredLogFormat(@TempDir Path dir) throws Exception {
        Path jar = Path.of(System.getProperty("lmcache.server.jar"));
        Path stale = dir.resolve("stale.aot");
        // what it holds does not matter: the launcher goes by its time
        Files.write(stale, new byte[4096]);
        Files.setLastModifiedTime(stale, FileTime.fromMillis(Files.getLastModifiedTime(jar).toMillis() - TimeUnit.HOURS.toMillis(1)));
        try (Launched server = launchHealthy(ROOT.resolve("bin/lmcache-server"), dir, Map.of("LMCACHE_LOG_FORMAT", "json",
                "LMCACHE_AOT_CACHE", stale.toString(), "LMCACHE_AOT_TRAIN", "0"), OperatorIT::serverArgs)) {
            List<JsonNode> events = jsonLines(server.output());
            assertTrue(events.stream().anyMatch(event -> event.get("level").asText().equals("WARN")
                    && event.get("formattedMessage").asText().contains("removed the stale ahead-of-time cache " + stale)), server.output());
            assertFalse(Files.exists(stale), "the stale cache is gone");
            JsonNode aot = JSON.readTree(Http.get("http://127.0.0.1:" + server.httpPort() + "/status").body()).path("aot_cache");
            assertFalse(aot.path("used").asBoolean(), aot.toString());
            assertEquals("", aot.path("file").asText(), "the JVM was not given it");
        }
    }

    /** Every non-blank line of {@code output} as a JSON object with the fields of the server's JSON log lines. */
    private static List<JsonNode> jsonLines(String output) throws IOException {
        List<JsonNode> events = new ArrayList<>();
        for (String line : output.lines().filter(line -> !line.isBlank()).toList()) {
            JsonNode event;
            try {
                event = JSON.readTree(line);
            } catch (IOException e) {
                throw new AssertionError("not a JSON line: " + line + "\n" + output, e);
            }
            assertTrue(event.has("level") && event.has("loggerName") && event.has("timestamp") && event.has("formattedMessage"), line);
            events.add(event);
        }
        return events;
    }

    @Test
    void thePoolFileTakesTheModeAskedForAndVersionNamesTheCommit() throws Exception {
        String name = "lmcache_mode_it_" + ProcessHandle.current().pid();
        try (ServerProcess server = ServerProcess.start("--shm-name", name, "--shm-mode", "0660")) {
            assertEquals("rw-rw----", PosixFilePermissions.toString(Files.getPosixFilePermissions(Path.of("/dev/shm", name))));
            String version = JSON.readTree(Http.get(server.httpBase() + "/version").body()).asText();
            String commit = JSON.readTree(Http.get(server.httpBase() + "/commit_id").body()).asText();
            assertTrue(version.startsWith("0.1.0"), version);
            String hex = commit.replace("-dirty", "");
            String expected = commit.equals("unknown") ? "0.1.0" : "0.1.0+" + hex.substring(0, Math.min(12, hex.length()))
                    + (commit.endsWith("-dirty") ? "-dirty" : "");
            assertEquals(expected, version, "the commit as build metadata");
            // bin/lmcache-server, when it rebuilds a changed checkout, adds -dirty
            assertEquals(builtCommit(), hex, "a plain mvn verify records the checkout's HEAD (an explicit -Dlmcache.commit wins)");
            assertEquals("0660", JSON.readTree(Http.get(server.httpBase() + "/config").body()).at("/mp/shm_mode").asText());
        }
    }

    /**
     * The commit the build was given (-Dlmcache.commit: bin/run-tests gives HEAD), else what buildnumber's git provider reads of
     * the checkout ({@code git log -1 --no-merges}: HEAD unless HEAD is a merge): what the jar must name.
     */
    private static String builtCommit() throws Exception {
        String given = System.getProperty("lmcache.commit", "");
        if (given.matches("[0-9a-f]{7,40}(-dirty)?")) {
            return given.replace("-dirty", "");
        }
        Processes.Result head = Processes.run(new ProcessBuilder("git", "-C", ROOT.toString(), "log", "-1", "--no-merges", "--format=%H"),
                Duration.ofSeconds(30));
        assertEquals(0, head.exitCode(), "CI and bin/run-tests build a git checkout: " + head.stderr());
        return head.stdout().strip();
    }
}
