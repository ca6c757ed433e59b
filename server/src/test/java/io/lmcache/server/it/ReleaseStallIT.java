package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A release that never returns (the test hook makes the next one block forever, as a CUDA IPC
 * close stuck in the driver would) stalls neither the request loop, nor REGISTER of another
 * worker, nor the reaper: it runs on the release thread, whose watchdog abandons it.
 */
@ExtendWith(ServerLogOnFailure.class)
class ReleaseStallIT {
    private static final JavaWorker.Geometry SMALL = new JavaWorker.Geometry(2, 32, 16, 2, 64);
    private static final int[] BLOCKS = JavaWorker.range(0, 16);

    private static double metric(ServerProcess server, String name) {
        return Http.metric(server, name);
    }

    @Test
    void aReleaseThatNeverReturnsStallsNothingElse() {
        try (ServerProcess server = ServerProcess.start(Map.of("LMCACHE_TEST_RELEASE_TIMEOUT_MS", "500"), "--test-hooks",
                "--http-admin-token", "hooks",
                "--test-liveness-floor-seconds", "1", "--worker-reap-timeout-seconds", "2", "--worker-registration-grace-seconds", "60",
                "--worker-disconnect-grace-seconds", "0");
             JavaWorker a = new JavaWorker(server.endpoint(), 601, "release/model", SMALL);
             JavaWorker b = new JavaWorker(server.endpoint(), 602, "release/model", SMALL)) {
            a.register();
            a.fill(BLOCKS, 1);
            assertTrue(a.store(JavaWorker.tokens(1, 256), 0, 256, BLOCKS, "a-1"));
            assertEquals(200, Http.post(server.httpBase() + "/test/block-next-release", "", "Authorization", "Bearer hooks").statusCode());

            a.unregister();
            double scansBefore = metric(server, "lmcache_mp_reaper_scans_total");
            // the request loop answers while A's release hangs
            assertTrue(a.ping(), "PING answered");
            b.register();
            b.fill(BLOCKS, 2);
            int[] tokens = JavaWorker.tokens(2, 256);
            assertTrue(b.store(tokens, 0, 256, BLOCKS, "b-1"), "STORE of another worker");
            assertTrue(b.retrieve(tokens, 0, 256, JavaWorker.range(16, 16), 0, "b-1"), "RETRIEVE of another worker");
            assertArrayEquals(b.read(BLOCKS), b.read(JavaWorker.range(16, 16)));

            await("the watchdog abandons the stuck release").atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(50))
                    .until(() -> metric(server, "lmcache_mp_release_timeouts_total") == 1);
            await("the reaper keeps scanning").atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(50))
                    .until(() -> metric(server, "lmcache_mp_reaper_scans_total") >= scansBefore + 2);
            double completedBefore = metric(server, "lmcache_mp_release_completed_total");
            b.unregister();
            await("a later release runs on the replacement thread").atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(50))
                    .until(() -> metric(server, "lmcache_mp_release_completed_total") == completedBefore + 1);
            assertTrue(b.ping());
            assertEquals(1.0, metric(server, "lmcache_mp_release_timeouts_total"));
        }
    }
}
