package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.WorkerMain;
import io.lmcache.server.testing.WorkerProcess;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The reaper against the real server and real worker processes, with the liveness timeouts
 * shortened through the test-only floor: waits are bounded by the configured timeouts.
 */
@ExtendWith(ServerLogOnFailure.class)
class LivenessIT {
    private static final JavaWorker.Geometry SMALL = new JavaWorker.Geometry(2, 32, 16, 2, 64);
    private static final int[] BLOCKS = JavaWorker.range(0, 16);
    private static final ObjectMapper JSON = new ObjectMapper();

    private static ServerProcess server(double timeoutS, double graceS, double disconnectS) {
        return ServerProcess.start(Map.of(), "--test-liveness-floor-seconds", "1", "--worker-reap-timeout-seconds", fmt(timeoutS),
                "--worker-registration-grace-seconds", fmt(graceS), "--worker-disconnect-grace-seconds", fmt(disconnectS));
    }

    private static String fmt(double seconds) {
        return Double.toString(seconds);
    }

    private static double reaped(ServerProcess server, String reason) {
        return Http.metric(server, "lmcache_mp_reaped_workers_total", "reason", reason);
    }

    private static double reapedTotal(ServerProcess server) {
        return Http.metric(server, "lmcache_mp_reaped_workers_total");
    }

    /** The instance ids {@code /status} lists as registered. */
    private static List<Long> registeredIds(ServerProcess server) throws IOException {
        List<Long> ids = new ArrayList<>();
        for (JsonNode id : JSON.readTree(Http.get(server.httpBase() + "/status").body()).get("registered_gpu_ids")) {
            ids.add(id.asLong());
        }
        return ids;
    }

    private static String maps(long pid) {
        try {
            return Files.readString(Path.of("/proc/" + pid + "/maps"));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Test
    void aKilledWorkerIsReapedAndUnmappedWhileALiveOneKeepsServing() throws Exception {
        double timeoutS = 2;
        List<Path> deadSegments = new ArrayList<>();
        try (ServerProcess server = server(timeoutS, 4, 2);
             JavaWorker live = new JavaWorker(server.endpoint(), 202, "liveness/model", SMALL);
             WorkerProcess dead = WorkerProcess.start("worker 201", WorkerMain.class, server.endpoint(), "201", "200")) {
            dead.readyWords().forEach(path -> deadSegments.add(Path.of(path)));
            live.register();
            live.fill(BLOCKS, 5);
            String before = maps(server.pid());
            for (Path segment : deadSegments) {
                assertTrue(before.contains(segment.toString()), "the server maps " + segment);
            }
            AtomicBoolean running = new AtomicBoolean(true);
            AtomicInteger rounds = new AtomicInteger();
            List<String> failures = new ArrayList<>();
            Thread traffic = new Thread(() -> {
                int i = 0;
                while (running.get()) {
                    int[] tokens = JavaWorker.tokens(9000 + i, 256);
                    boolean ok = live.ping() && live.store(tokens, 0, 256, BLOCKS, "live-" + i)
                            && live.retrieve(tokens, 0, 256, JavaWorker.range(16, 16), 0, "live-" + i);
                    if (!ok) {
                        synchronized (failures) {
                            failures.add("round " + i);
                        }
                    }
                    rounds.incrementAndGet();
                    i++;
                }
            });
            traffic.start();
            dead.kill();
            // the bound only keeps a broken reaper from hanging the test; what happened is read from the counters
            await("reap of the killed worker").atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(50))
                    .until(() -> reapedTotal(server) == 1);
            assertEquals(List.of(202L), registeredIds(server), "the killed worker is gone, the live one registered");
            await("its mappings gone").atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(50))
                    .until(() -> deadSegments.stream().noneMatch(segment -> maps(server.pid()).contains(segment.toString())));
            running.set(false);
            traffic.join(10_000);
            assertEquals(List.of(), failures, "the live worker's stores and retrieves never failed");
            assertTrue(rounds.get() > 5, "the live worker kept working: " + rounds.get() + " rounds");
            assertEquals(1.0, reapedTotal(server), "only the dead worker was reaped");
            assertTrue(live.store(JavaWorker.tokens(77, 256), 0, 256, BLOCKS, "after"));
        } finally {
            for (Path segment : deadSegments) {
                Files.deleteIfExists(segment);
            }
        }
    }

    @Test
    void aWorkerThatNeverPingsButStaysConnectedSurvivesTheGrace() {
        double graceS = 3;
        try (ServerProcess server = server(2, graceS, 2);
             JavaWorker idle = new JavaWorker(server.endpoint(), 301, "liveness/model", SMALL)) {
            idle.register();
            idle.fill(BLOCKS, 6);
            // past the grace plus two scans, it is still registered (#4715)
            await().during(Duration.ofMillis((long) (graceS * 1000 + 1500))).atMost(Duration.ofSeconds(10))
                    .until(() -> reapedTotal(server) == 0);
            assertTrue(idle.store(JavaWorker.tokens(1, 256), 0, 256, BLOCKS, "late"), "still registered after the grace");
        }
    }

    @Test
    void aWorkerThatDisconnectsIsReapedAfterTheDisconnectGrace() throws Exception {
        double disconnectS = 2;
        try (ServerProcess server = server(8, 60, disconnectS)) {
            JavaWorker leaving = new JavaWorker(server.endpoint(), 401, "liveness/model", SMALL);
            leaving.register();
            leaving.ping();
            leaving.close();
            await("disconnect reap").atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(50))
                    .until(() -> reapedTotal(server) == 1);
            // reaped for the disconnect, not for the silence its 8 s timeout would have caught later
            assertEquals(1.0, reaped(server, "disconnect"));
            assertEquals(0.0, reaped(server, "silence"));
            assertEquals(List.of(), registeredIds(server));
        }
    }

    @Test
    void aReapedWorkerThatPingsAgainReRegistersAndServes() {
        try (ServerProcess server = server(2, 4, 2);
             JavaWorker worker = new JavaWorker(server.endpoint(), 501, "liveness/model", SMALL)) {
            worker.register();
            worker.fill(BLOCKS, 7);
            assertTrue(worker.ping());
            await("silence reap").atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(50))
                    .until(() -> reaped(server, "silence") == 1);
            assertTrue(worker.ping(), "PING always answers true");
            int[] tokens = JavaWorker.tokens(2, 256);
            assertFalse(worker.store(tokens, 0, 256, BLOCKS, "reaped"), "a reaped instance is not registered");
            worker.register();
            assertTrue(worker.store(tokens, 0, 256, BLOCKS, "back"));
            assertTrue(worker.retrieve(tokens, 0, 256, JavaWorker.range(16, 16), 0, "back"));
            assertTrue(Arrays.equals(worker.read(BLOCKS), worker.read(JavaWorker.range(16, 16))));
        }
    }
}
