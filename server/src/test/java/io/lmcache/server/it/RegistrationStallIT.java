package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
 * A REGISTER whose handler never returns (the test hook blocks the next one, as a CUDA IPC open stuck in the driver would)
 * is answered at the transfer lanes' deadline (1 s here, 30 s in production) with its failure value, None, so the worker does
 * not wait out its 300 s and fail vLLM's start: its STOREs answer false until it registers again. The server's one transfer
 * thread (a host without a GPU has one) is replaced, so this worker's later requests and another worker's are served.
 */
@ExtendWith(ServerLogOnFailure.class)
class RegistrationStallIT {
    private static final JavaWorker.Geometry SMALL = new JavaWorker.Geometry(2, 32, 16, 2, 64);
    private static final int[] BLOCKS = JavaWorker.range(0, 16);

    private static double metric(ServerProcess server, String name) {
        return Http.metric(server, name);
    }

    @Test
    void aRegisterThatNeverReturnsIsAnsweredAtTheDeadlineAndBlocksNoOne() {
        try (ServerProcess server = ServerProcess.start(Map.of("LMCACHE_TEST_LANE_DEADLINE_MS", "1000"), "--test-hooks",
                "--http-admin-token", "hooks");
             JavaWorker a = new JavaWorker(server.endpoint(), 701, "stall/model", SMALL);
             JavaWorker b = new JavaWorker(server.endpoint(), 702, "stall/model", SMALL)) {
            assertEquals(0.0, metric(server, "lmcache_mp_transfer_lane_deadline_answers_total"), "declared at 0");
            assertEquals(0.0, metric(server, "lmcache_mp_transfer_threads_abandoned"));
            assertEquals(200, Http.post(server.httpBase() + "/test/block-next-registration", "", "Authorization", "Bearer hooks")
                    .statusCode());

            a.register(); // answered (None) within the client's 10 s although its handler never returns
            assertEquals(1.0, metric(server, "lmcache_mp_transfer_lane_stalls_total"));
            assertEquals(1.0, metric(server, "lmcache_mp_transfer_lane_deadline_answers_total"));
            // its thread, still in the handler, is given up just after the answer
            await().atMost(Duration.ofSeconds(5)).pollInterval(Duration.ofMillis(50))
                    .until(() -> metric(server, "lmcache_mp_transfer_threads_abandoned") == 1.0);
            a.fill(BLOCKS, 1);
            int[] tokens = JavaWorker.tokens(1, 256);
            assertFalse(a.store(tokens, 0, 256, BLOCKS, "a-1"), "the stalled REGISTER took no effect: its STORE answers false");
            assertTrue(a.ping(), "the request loop answers");

            // the only transfer thread is stuck: another worker is served by its replacement
            b.register();
            b.fill(BLOCKS, 2);
            int[] other = JavaWorker.tokens(2, 256);
            assertTrue(b.store(other, 0, 256, BLOCKS, "b-1"), "STORE of another worker");
            assertTrue(b.retrieve(other, 0, 256, JavaWorker.range(16, 16), 0, "b-1"), "RETRIEVE of another worker");
            assertArrayEquals(b.read(BLOCKS), b.read(JavaWorker.range(16, 16)));

            // registering again (the hook blocks one registration only) takes effect
            a.register();
            assertTrue(a.store(tokens, 0, 256, BLOCKS, "a-2"), "the worker that registered again stores");
            assertTrue(a.retrieve(tokens, 0, 256, JavaWorker.range(16, 16), 0, "a-2"));
            assertArrayEquals(a.read(BLOCKS), a.read(JavaWorker.range(16, 16)), "byte for byte");
            assertEquals(1.0, metric(server, "lmcache_mp_transfer_lane_stalls_total"), "nothing else was stalled");
            assertEquals(1.0, metric(server, "lmcache_mp_transfer_lane_deadline_answers_total"));
            assertEquals(1.0, metric(server, "lmcache_mp_transfer_threads_abandoned"), "the stuck handler never returned");
            assertEquals(0.0, metric(server, "lmcache_mp_transfer_lane_abandon_cap_hits_total"));
        }
    }
}
