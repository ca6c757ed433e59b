package io.lmcache.server.it;

import static io.lmcache.server.testing.TestClient.pack;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import io.lmcache.server.protocol.testing.Golden;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.Processes;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Start-up, the command line as users type it, and graceful shutdown. */
@ExtendWith(ServerLogOnFailure.class)
class LifecycleIT {

    /** Runs bin/lmcache-server to its exit (bounded: a launcher that starts a server instead fails, it does not hang). */
    private static Processes.Result launcher(String... args) {
        List<String> command = new ArrayList<>(List.of(Golden.repoRoot().resolve("bin/lmcache-server").toString()));
        command.addAll(List.of(args));
        ProcessBuilder builder = new ProcessBuilder(command);
        builder.environment().put("JAVA_HOME", Path.of(System.getProperty("lmcache.test.java")).getParent().getParent().toString());
        return Processes.run(builder, Duration.ofSeconds(120));
    }

    @Test
    void launcherHelpListsTheFlags() throws Exception {
        Processes.Result help = launcher("--help");
        assertEquals(0, help.exitCode(), help.stderr());
        for (String flag : List.of("--host", "--port", "--chunk-size", "--l1-size-gb", "--max-workers", "--max-gpu-workers",
                "--max-cpu-workers", "--eviction-policy", "--eviction-trigger-watermark", "--eviction-ratio",
                "--worker-reap-timeout-seconds", "--worker-registration-grace-seconds", "--http-host", "--http-port",
                "--supported-transfer-mode", "--shm-name", "--config-file", "--version")) {
            assertTrue(help.stdout().contains(flag), "--help lists " + flag);
        }
    }

    @Test
    void launcherBadValueExitsTwoWithOneLine() throws Exception {
        Processes.Result bad = launcher("--l1-size-gb", "2", "--eviction-ratio", "7");
        assertEquals(2, bad.exitCode());
        List<String> lines = bad.stderr().strip().lines().filter(l -> l.startsWith("lmcache-server: error")).toList();
        assertEquals(List.of("lmcache-server: error: --eviction-ratio: must be in (0, 1], got 7 (see --help)"), lines);
        assertTrue(bad.stderr().strip().lines().noneMatch(l -> l.contains("Exception")), bad.stderr());
    }

    /** Runs the server jar to its exit (bounded) and returns its combined output; asserts exit 2. */
    private static String failedStartUp(String... args) throws InterruptedException {
        ServerProcess server = ServerProcess.launch(Map.of(), args);
        try {
            assertTrue(server.process().waitFor(60, TimeUnit.SECONDS), "the server exits");
            assertEquals(2, server.process().exitValue(), server.log());
            return server.log();
        } finally {
            server.close();
        }
    }

    /** The one error line a start-up failure prints, and no stack trace anywhere. */
    private static String oneErrorLine(String output) {
        List<String> lines = output.lines().filter(l -> l.startsWith("lmcache-server: error")).toList();
        assertEquals(1, lines.size(), output);
        assertTrue(output.lines().noneMatch(l -> l.startsWith("\tat ") || l.startsWith("Caused by:")), output);
        return lines.getFirst();
    }

    @Test
    void portInUseFailsStartUpNamingThePortAndThatItIsInUse() throws Exception {
        try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            int port = taken.getLocalPort();
            // the message is the behaviour here: JeroMQ's own says only "Errno 48"
            String line = oneErrorLine(failedStartUp("--port", Integer.toString(port)));
            assertTrue(line.contains("cannot bind the ZeroMQ ROUTER to tcp://127.0.0.1:" + port + ": port " + port + " is in use"), line);
            assertFalse(line.contains("Errno"), line);
        }
    }

    @Test
    void httpPortInUseFailsStartUpClearly() throws Exception {
        try (ServerProcess first = ServerProcess.start()) {
            String line = oneErrorLine(failedStartUp("--http-port", Integer.toString(first.httpPort())));
            assertTrue(line.contains("cannot bind the HTTP API"), line);
        }
    }

    @Test
    void invalidHostIsOneLineAndExitTwo() throws Exception {
        String line = oneErrorLine(failedStartUp("--host", "999.1.1.1"));
        assertTrue(line.contains("--host"), line);
    }

    @Test
    void deviceCudaWithoutAGpuIsRefusedBeforeAnythingIsLoggedOrAllocated() throws Exception {
        // CI and the development machines have no GPU: there --device cuda must fail, in one line
        assumeFalse(Files.exists(Path.of("/dev/nvidiactl")), "a GPU host: --device cuda starts");
        String shm = "lmcache_device_it_" + ProcessHandle.current().pid();
        String output = failedStartUp("--device", "cuda", "--shm-name", shm);
        String line = oneErrorLine(output);
        assertTrue(line.contains("--device cuda"), line);
        assertEquals(List.of(line), output.strip().lines().toList(), "the refusal is all there is: no start banner, no other log line");
        assertFalse(Files.exists(Path.of("/dev/shm", shm)), "no pool was created");
    }

    @Test
    void configFileThatIsADirectoryIsOneLineAndExitTwo() throws Exception {
        Path dir = Files.createTempDirectory("lmcache-config-dir");
        try {
            String line = oneErrorLine(failedStartUp("--config-file", dir.toString()));
            assertTrue(line.contains("is a directory"), line);
        } finally {
            Files.deleteIfExists(dir);
        }
    }

    @Test
    void sigtermAnswersWhatIsInFlightThenExits() throws Exception {
        ServerProcess server = ServerProcess.start();
        assertEquals(200, Http.get(server.httpBase() + "/healthcheck").statusCode());
        assertEquals(0.0, Http.metric(server, "lmcache_mp_log_lines_total", "level", "error"), "a clean start-up logs no errors");
        try (TestClient client = new TestClient(server.endpoint())) {
            int sent = 2000;
            for (int i = 0; i < sent; i++) {
                client.send(22, pack(p -> p.packInt(1)));
            }
            TestClient.Reply first = client.receive(Duration.ofSeconds(10));
            assertEquals("c3", first.payloadHex());
            server.process().destroy();
            int received = 1;
            TestClient.Reply reply;
            while ((reply = client.receive(Duration.ofSeconds(3))) != null) {
                assertEquals("c3", reply.payloadHex());
                received++;
            }
            assertTrue(received > 1, "replies keep coming after SIGTERM: " + received);
        }
        assertTrue(server.process().waitFor(30, TimeUnit.SECONDS));
        assertNotEquals(-1, server.process().exitValue());
        // the process is gone, so no counter can be scraped: its stderr is the one record left, and only its
        // severity field is read (a line at ERROR), never a message's wording
        assertEquals(0, server.countLog("^\\[[^\\]]*\\] LMCache ERROR:"), "a clean shutdown logs no errors");
    }
}
