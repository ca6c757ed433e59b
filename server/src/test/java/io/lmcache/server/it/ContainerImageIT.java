package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.Processes;
import io.lmcache.server.testing.ServerProcess;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The built image itself, where one is: {@code LMCACHE_TEST_IMAGE=lmcache-server:dev} (and podman or
 * docker on PATH, {@code LMCACHE_CONTAINER_ENGINE} to choose). Runs the image's own entry point with its
 * default command as the container does, waits for {@code /healthcheck}, runs the image's health check
 * command and {@code /opt/venv/bin/lmcache ping} inside it, and checks the image has no curl. Not in the
 * default suite (the image is built after the tests; CI checks it with deploy/container/ci-image-check.sh):
 * run by name, {@code -Dit.test=ContainerImageIT}; fails without an image.
 */
class ContainerImageIT {
    private static final String IMAGE = System.getenv().getOrDefault("LMCACHE_TEST_IMAGE", "");
    private static final String ENGINE = System.getenv().getOrDefault("LMCACHE_CONTAINER_ENGINE", "podman");

    private static Processes.Result engine(String... args) {
        List<String> command = new ArrayList<>(List.of(ENGINE));
        command.addAll(List.of(args));
        return Processes.run(new ProcessBuilder(command), Duration.ofSeconds(120));
    }

    @Test
    void theImagesEntryPointServesAndItsHealthCheckPasses() {
        assertFalse(IMAGE.isEmpty(), "set LMCACHE_TEST_IMAGE to the image to test (this test runs only by name: -Dit.test=ContainerImageIT)");
        int httpPort = ServerProcess.freePort();
        String name = "lmcache-image-it-" + httpPort;
        // the default CMD with the HTTP port moved off 8080 (host network: the test reaches it directly) and a pool that fits --shm-size
        Processes.Result started = engine("run", "-d", "--name", name, "--network", "host", "--shm-size", "512m", IMAGE,
                "--host", "127.0.0.1", "--port", Integer.toString(ServerProcess.freePort()), "--http-port", Integer.toString(httpPort),
                "--l1-size-gb", "0.25");
        assertEquals(0, started.exitCode(), started.stderr());
        try {
            await("the container's /healthcheck").atMost(Duration.ofSeconds(90)).pollInterval(Duration.ofMillis(500)).until(() -> {
                try {
                    return Http.get("http://127.0.0.1:" + httpPort + "/healthcheck").statusCode() == 200;
                } catch (UncheckedIOException e) {
                    return false;
                }
            });
            Processes.Result health = engine("exec", name, "/opt/lmcache-server/bin/lmcache-healthcheck");
            assertEquals(0, health.exitCode(), health.stdout() + health.stderr());
            Processes.Result ping = engine("exec", name, "/opt/venv/bin/lmcache", "ping", "kvcache", "--url", "127.0.0.1:" + httpPort);
            assertEquals(0, ping.exitCode(), ping.stdout() + ping.stderr());
            assertTrue(engine("exec", name, "sh", "-c", "command -v curl").exitCode() != 0, "no curl in the image");
            assertEquals(0, engine("exec", name, "test", "-x", "/opt/java/runtime/bin/java").exitCode(), "the jlinked runtime");
        } finally {
            engine("rm", "-f", name);
        }
    }
}
