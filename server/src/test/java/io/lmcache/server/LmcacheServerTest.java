package io.lmcache.server;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.config.ConfigLoader;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.testing.ServerProcess;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The composition root in-process: what is built is closed, on a failed start too, and a closed server frees its ports. */
class LmcacheServerTest {
    private static ServerConfig config(String shmName, int port, int httpPort) {
        String[] args = {"--host", "127.0.0.1", "--port", Integer.toString(port), "--http-host", "127.0.0.1", "--http-port",
            Integer.toString(httpPort), "--l1-size-gb", "0.016", "--device", "host", "--shm-name", shmName};
        ConfigLoader.Outcome outcome = ConfigLoader.load(args, Map.of());
        if (outcome instanceof ConfigLoader.Outcome.Run run) {
            return run.config();
        }
        throw new IllegalArgumentException(outcome.toString());
    }

    private static String shmName(String what) {
        return "lmcache_test_" + what + "_" + ProcessHandle.current().pid();
    }

    @Test
    void aPortConflictWhileBuildingClosesWhatWasBuilt() throws Exception {
        String shm = shmName("conflict");
        try (ServerSocket busy = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            ServerConfig config = config(shm, ServerProcess.freePort(), busy.getLocalPort());
            assertThrows(IllegalStateException.class, () -> LmcacheServer.start(config));
        }
        assertFalse(Files.exists(Path.of("/dev/shm", shm)), "the L1 pool built before the HTTP bind failed is gone");
    }

    @Test
    void closeReleasesThePoolAndThePortsAndIsIdempotent() {
        assertTimeoutPreemptively(Duration.ofSeconds(60), () -> {
            String shm = shmName("close");
            int port = ServerProcess.freePort();
            int httpPort = ServerProcess.freePort();
            LmcacheServer server = LmcacheServer.start(config(shm, port, httpPort));
            assertTrue(Files.exists(Path.of("/dev/shm", shm)));
            server.close();
            server.awaitStopped();
            server.close();
            assertFalse(Files.exists(Path.of("/dev/shm", shm)), "the pool is removed");
            // every listener was closed: the same ports bind again
            LmcacheServer again = LmcacheServer.start(config(shm, port, httpPort));
            again.close();
            again.awaitStopped();
        });
    }
}
