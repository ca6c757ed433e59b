package io.lmcache.server.it;

import static io.lmcache.server.testing.TestClient.pack;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.protocol.testing.Golden;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Start-up, the command line as users type it, and graceful shutdown. */
@ExtendWith(ServerLogOnFailure.class)
class LifecycleIT {

    private static ProcessResult launcher(String... args) throws IOException, InterruptedException {
        List<String> command = new java.util.ArrayList<>(List.of(Golden.repoRoot().resolve("bin/lmcache-server").toString()));
        command.addAll(List.of(args));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(false);
        builder.environment().put("JAVA_HOME", Path.of(System.getProperty("lmcache.test.java")).getParent().getParent().toString());
        Process process = builder.start();
        String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        String err = new String(process.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(process.waitFor(60, TimeUnit.SECONDS));
        return new ProcessResult(process.exitValue(), out, err);
    }

    private record ProcessResult(int code, String out, String err) {}

    private static final class Path {
        static java.nio.file.Path of(String path) {
            return java.nio.file.Path.of(path);
        }
    }

    @Test
    void launcherHelpListsTheFlags() throws Exception {
        ProcessResult help = launcher("--help");
        assertEquals(0, help.code(), help.err());
        for (String flag : List.of("--host", "--port", "--chunk-size", "--l1-size-gb", "--max-workers", "--max-gpu-workers",
                "--max-cpu-workers", "--eviction-policy", "--eviction-trigger-watermark", "--eviction-ratio",
                "--worker-reap-timeout-seconds", "--worker-registration-grace-seconds", "--http-host", "--http-port",
                "--supported-transfer-mode", "--shm-name", "--config-file", "--version")) {
            assertTrue(help.out().contains(flag), "--help lists " + flag);
        }
    }

    @Test
    void launcherBadValueExitsTwoWithOneLine() throws Exception {
        ProcessResult bad = launcher("--l1-size-gb", "2", "--eviction-ratio", "7");
        assertEquals(2, bad.code());
        List<String> lines = bad.err().strip().lines().filter(l -> l.startsWith("lmcache-server: error")).toList();
        assertEquals(List.of("lmcache-server: error: --eviction-ratio: must be in (0, 1], got 7 (see --help)"), lines);
        assertTrue(bad.err().strip().lines().noneMatch(l -> l.contains("Exception")), bad.err());
    }

    @Test
    void portInUseFailsStartUpClearly() throws Exception {
        try (ServerProcess first = ServerProcess.start()) {
            ServerProcess second = ServerProcess.launch(Map.of(), "--port", Integer.toString(first.port()));
            assertTrue(second.process().waitFor(30, TimeUnit.SECONDS), "second server exits");
            assertEquals(1, second.process().exitValue());
            assertTrue(second.log().contains("cannot bind the ZeroMQ ROUTER to tcp://127.0.0.1:" + first.port()), second.log());
            second.close();
        }
    }

    @Test
    void sigtermAnswersWhatIsInFlightThenExits() throws Exception {
        ServerProcess server = ServerProcess.start();
        assertEquals(200, Http.get(server.httpBase() + "/healthcheck").statusCode());
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
        server.awaitLog("shutting down: answering in-flight requests", Duration.ofSeconds(1));
        server.awaitLog("LMCache INFO: shut down", Duration.ofSeconds(1));
        assertEquals(0, server.countLog("LMCache ERROR"), "a clean shutdown logs no errors");
    }
}
