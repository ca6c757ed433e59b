package io.lmcache.server.it;

import static io.lmcache.server.testing.TestClient.pack;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.testing.EngineDrivenWorker;
import io.lmcache.server.testing.EngineDrivenWorkerMain;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import io.lmcache.server.testing.WorkerProcess;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Engine-driven workers copying into and out of the server's shared-memory pool, as LMCache's engine-driven client does. */
@ExtendWith(ServerLogOnFailure.class)
class EngineDrivenIT {
    private static final int LAYERS = 4;
    private static final int HIDDEN = 128;

    private static byte[] random(long seed, long length) {
        byte[] bytes = new byte[(int) length];
        new Random(seed).nextBytes(bytes);
        return bytes;
    }

    private static JsonNode status(ServerProcess server) {
        try {
            return new ObjectMapper().readTree(Http.get(server.httpBase() + "/status").body());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static double usedBytes(ServerProcess server) {
        return Http.metric(server, "lmcache_mp_l1_memory_usage_bytes");
    }

    /** A full cycle for one worker and prefix: store two chunks, look them up, retrieve and compare. */
    private static void roundTrip(EngineDrivenWorker worker, JavaWorker lookups, long seed) {
        int[] tokens = JavaWorker.tokens(seed, 512);
        String request = "ed-" + seed;
        EngineDrivenWorker.Prepared prepared = worker.prepareStore(tokens, 0, 512, request);
        assertEquals(List.of(0, 1), prepared.chunkIndices());
        assertEquals(2, prepared.slots().size());
        List<byte[]> written = new ArrayList<>();
        for (EngineDrivenWorker.Slot slot : prepared.slots()) {
            assertEquals(worker.objectBytes(), slot.length(), "length is exactly the chunk object's bytes");
            assertEquals(List.of(2, LAYERS, 256, HIDDEN), slot.shape());
            assertEquals("bfloat16", slot.dtype());
            byte[] bytes = random(seed * 31 + written.size(), slot.length());
            worker.write(slot, bytes);
            written.add(bytes);
        }
        assertTrue(worker.commitStore(tokens, 0, 512, request));
        assertEquals(2, lookups.lookup(tokens, 512, request, 1, 1), "stored chunks are ordinary cache objects");
        List<EngineDrivenWorker.Slot> slots = worker.prepareRetrieve(tokens, 0, 512, request);
        assertNotNull(slots);
        assertEquals(2, slots.size());
        for (int i = 0; i < 2; i++) {
            assertArrayEquals(written.get(i), worker.read(slots.get(i)), "chunk " + i + " byte-equal");
        }
        assertTrue(worker.commitRetrieve(tokens, 0, 512, request));
    }

    @Test
    void roundTripCachedChunksAndExactAccounting() {
        try (ServerProcess server = ServerProcess.start();
             EngineDrivenWorker worker = new EngineDrivenWorker(server.endpoint(), 601, "ed/model", LAYERS, HIDDEN);
             JavaWorker lookups = new JavaWorker(server.endpoint(), 0, "ed/model", new JavaWorker.Geometry(0, 1, 16, 1, 8))) {
            worker.register();
            assertTrue(worker.shmName().startsWith("lmcache_l1_pool_"), worker.shmName());
            roundTrip(worker, lookups, 1);
            assertEquals(2.0 * worker.objectBytes(), usedBytes(server), "the pool holds exactly the two objects");
            // everything cached: an empty slot list, and the worker sends no commit
            int[] tokens = JavaWorker.tokens(1, 512);
            EngineDrivenWorker.Prepared cached = worker.prepareStore(tokens, 0, 512, "again");
            assertTrue(cached.slots().isEmpty() && cached.chunkIndices().isEmpty());
            // chunk 0 cached, chunk 1 new: only chunk 1 is reserved
            int[] extended = tokens.clone();
            extended[300] += 1;
            EngineDrivenWorker.Prepared partial = worker.prepareStore(extended, 0, 512, "partial");
            assertEquals(List.of(1), partial.chunkIndices());
            worker.write(partial.slots().getFirst(), random(9, worker.objectBytes()));
            assertTrue(worker.commitStore(extended, 0, 512, "partial"));
            assertEquals(3.0 * worker.objectBytes(), usedBytes(server));
            // a miss: no slots, and the commit that follows is still answered true
            int[] unknown = JavaWorker.tokens(99, 512);
            assertNull(worker.prepareRetrieve(unknown, 0, 512, "miss"));
            assertTrue(worker.commitRetrieve(unknown, 0, 512, "miss"));
            worker.unregister();
        }
    }

    @Test
    void concurrentWorkers() throws Exception {
        try (ServerProcess server = ServerProcess.start("--max-cpu-workers", "4")) {
            ExecutorService pool = Executors.newFixedThreadPool(4);
            List<Future<?>> results = new ArrayList<>();
            for (int w = 0; w < 4; w++) {
                long id = 700 + w;
                results.add(pool.submit(() -> {
                    try (EngineDrivenWorker worker = new EngineDrivenWorker(server.endpoint(), id, "ed/model", LAYERS, HIDDEN);
                         JavaWorker lookups = new JavaWorker(server.endpoint(), 0, "ed/model", new JavaWorker.Geometry(0, 1, 16, 1, 8))) {
                        worker.register();
                        for (int round = 0; round < 5; round++) {
                            roundTrip(worker, lookups, id * 100 + round);
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> result : results) {
                result.get();
            }
            pool.shutdown();
            assertEquals(4 * 5 * 2 * (double) (2L * LAYERS * 256 * HIDDEN * 2), usedBytes(server));
        }
    }

    @Test
    void anAbandonedReservationIsReclaimedAtItsTtl() {
        try (ServerProcess server = ServerProcess.start("--l1-write-ttl-seconds", "2");
             EngineDrivenWorker worker = new EngineDrivenWorker(server.endpoint(), 801, "ed/model", LAYERS, HIDDEN)) {
            worker.register();
            int[] tokens = JavaWorker.tokens(5, 512);
            assertEquals(2, worker.prepareStore(tokens, 0, 512, "abandoned").slots().size());
            assertEquals(2.0 * worker.objectBytes(), usedBytes(server), "reserved");
            await().atMost(Duration.ofSeconds(8)).pollInterval(Duration.ofMillis(100)).until(() -> usedBytes(server) == 0);
            assertFalse(worker.commitStore(tokens, 0, 512, "abandoned"), "a commit after the TTL finds nothing");
            assertTrue(worker.prepareStore(tokens, 0, 512, "retry").slots().size() == 2, "the chunks can be stored again");
        }
    }

    @Test
    void aWorkerKilledBetweenPrepareAndCommitLeavesNothingLockedAfterTheReap() {
        try (ServerProcess server = ServerProcess.start(Map.of(), "--test-liveness-floor-seconds", "1", "--worker-reap-timeout-seconds", "2",
                "--worker-registration-grace-seconds", "4", "--worker-disconnect-grace-seconds", "2");
             EngineDrivenWorker survivor = new EngineDrivenWorker(server.endpoint(), 902, "ed/model", LAYERS, HIDDEN);
             JavaWorker lookups = new JavaWorker(server.endpoint(), 0, "ed/model", new JavaWorker.Geometry(0, 1, 16, 1, 8))) {
            survivor.register();
            roundTrip(survivor, lookups, 7);
            // a worker process reserves two slots for a STORE and pins the survivor's chunks, then is SIGKILLed
            try (WorkerProcess dying = WorkerProcess.start("engine-driven worker 901", EngineDrivenWorkerMain.class, server.endpoint(), "901",
                    Integer.toString(LAYERS), Integer.toString(HIDDEN), "6", "7")) {
                assertEquals(List.of("2"), dying.readyWords(), "two slots reserved");
                assertEquals(4.0 * survivor.objectBytes(), usedBytes(server), "the survivor's chunks and the dying worker's reservation");
                JsonNode before = status(server).get("storage_manager").get("l1_managers").get("default");
                assertEquals(2, before.get("pinned_count").asInt(), "the dying worker pins the survivor's two chunks");
                assertEquals(2, before.get("write_locked_count").asInt(), "and holds two reserved slots");
                dying.kill();
            }
            await().atMost(Duration.ofSeconds(8)).pollInterval(Duration.ofMillis(100))
                    .until(() -> Http.metric(server, "lmcache_mp_reaped_workers_total", "reason", "disconnect") == 1);
            await().atMost(Duration.ofSeconds(5)).until(() -> usedBytes(server) == 2.0 * survivor.objectBytes());
            assertEquals(1.0, Http.metric(server, "lmcache_mp_reaped_workers_total"), "only the killed worker was reaped");
            JsonNode l1 = status(server).get("storage_manager").get("l1_managers").get("default");
            assertEquals(0, l1.get("pinned_count").asInt(), "the dead worker's PREPARE_RETRIEVE pins are released");
            assertEquals(0, l1.get("write_locked_count").asInt(), "its reserved slots are gone");
            roundTrip(survivor, lookups, 8);
        }
    }

    /**
     * The regression of issue 45: a LOOKUP of chunks a since-dead engine-driven worker reserved stayed pending until the write
     * TTL. The TTL, reap timeout and disconnect grace are far away here, so only the reservation's own liveness can answer.
     */
    @Test
    void aKilledWorkersReservationIsACleanMissAtOnce() {
        try (ServerProcess server = ServerProcess.start("--l1-write-ttl-seconds", "600");
             EngineDrivenWorker survivor = new EngineDrivenWorker(server.endpoint(), 912, "ed/model", LAYERS, HIDDEN);
             JavaWorker lookups = new JavaWorker(server.endpoint(), 0, "ed/model", new JavaWorker.Geometry(0, 1, 16, 1, 8))) {
            survivor.register();
            roundTrip(survivor, lookups, 17); // the chunks the dying worker pins
            int[] reservedTokens = JavaWorker.tokens(16, 512);
            try (WorkerProcess dying = WorkerProcess.start("engine-driven worker 911", EngineDrivenWorkerMain.class, server.endpoint(), "911",
                    Integer.toString(LAYERS), Integer.toString(HIDDEN), "16", "17")) {
                assertEquals(List.of("2"), dying.readyWords(), "two slots reserved");
                assertEquals(0, lookups.lookup(reservedTokens, 512, "while-alive", 1, 1), "a reservation is a miss, as LMCache's staging");
                dying.kill();
            }
            await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(50)).until(() -> Http.metric(server,
                    "lmcache_mp_engine_driven_released_total", "kind", "store", "reason", "disconnect") == 2);
            assertEquals(0, lookups.lookup(reservedTokens, 512, "after-kill", 1, 1), "a clean miss");
            assertEquals(0.0, Http.metric(server, "lmcache_mp_l1_lookups_after_writes_total"), "no LOOKUP waited on the reservation");
            assertEquals(0.0, Http.metric(server, "lmcache_mp_reaped_workers_total"), "answered before any reap");
            assertEquals(0.0, Http.metric(server, "lmcache_mp_engine_driven_expired_total"), "and before the TTL");
            roundTrip(survivor, lookups, 16); // another worker stores the chunks (they are not EXISTS) and they are hits then
        }
    }

    /**
     * The golden {@code engine_driven_abandon} scenario with the first worker still connected: its reservation neither delays
     * the second worker's LOOKUP nor blocks its PREPARE_STORE (superseded, as LMCache stages each writer apart); the first
     * worker's late COMMIT_STORE answers false.
     */
    @Test
    void aLiveWorkersReservationBlocksNoOtherWriter() {
        try (ServerProcess server = ServerProcess.start("--l1-write-ttl-seconds", "600");
             EngineDrivenWorker abandoning = new EngineDrivenWorker(server.endpoint(), 921, "ed/model", LAYERS, HIDDEN);
             EngineDrivenWorker other = new EngineDrivenWorker(server.endpoint(), 922, "ed/model", LAYERS, HIDDEN);
             JavaWorker lookups = new JavaWorker(server.endpoint(), 0, "ed/model", new JavaWorker.Geometry(0, 1, 16, 1, 8))) {
            abandoning.register();
            other.register();
            int[] tokens = JavaWorker.tokens(21, 512);
            assertEquals(2, abandoning.prepareStore(tokens, 0, 512, "req-a").slots().size());
            assertEquals(0, lookups.lookup(tokens, 512, "req-a", 1, 1));
            roundTrip(other, lookups, 21);
            assertFalse(abandoning.commitStore(tokens, 0, 512, "req-a"), "superseded by the other worker's store");
            assertEquals(2.0 * other.objectBytes(), usedBytes(server), "the superseded reservation's memory is freed at its commit");
            assertEquals(0.0, Http.metric(server, "lmcache_mp_l1_lookups_after_writes_total"));
        }
    }

    @Test
    void badInputGetsFailureValuesAndCounters() {
        try (ServerProcess server = ServerProcess.start();
             EngineDrivenWorker worker = new EngineDrivenWorker(server.endpoint(), 1001, "ed/model", LAYERS, HIDDEN);
             TestClient client = new TestClient(server.endpoint())) {
            worker.register();
            int[] tokens = JavaWorker.tokens(11, 512);
            // slots for an unknown instance: an empty slot list (never a context without one)
            TestClient.Reply unknown = client.call(16, worker.key(tokens, 0, 512, "x"), pack(p -> p.packLong(424242)));
            assertEquals("81a7636f6e7465787482a5736c6f747390ad6368756e6b5f696e646963657390", unknown.payloadHex());
            assertFalse(worker.commitStore(tokens, 0, 512, "never-prepared"), "COMMIT_STORE without PREPARE_STORE");
            assertEquals(2, worker.prepareStore(tokens, 0, 512, "once").slots().size());
            assertTrue(worker.commitStore(tokens, 0, 512, "once"));
            assertFalse(worker.commitStore(tokens, 0, 512, "once"), "a double COMMIT_STORE");
            assertFalse(worker.commitRetrieve(tokens, 0, 512, "never-prepared"), "COMMIT_RETRIEVE without PREPARE_RETRIEVE");
            TestClient.Reply pickled = client.call(17, worker.key(JavaWorker.tokens(12, 512), 0, 512, "p"), pack(p -> p.packLong(1001)),
                    pack(p -> p.packBinaryHeader(3).writePayload(new byte[] {(byte) 0x80, 4, 0x2e})));
            assertEquals("c2", pickled.payloadHex(), "the pickle data path is refused");
            String scrape = Http.get(server.httpBase() + "/metrics").body();
            assertEquals(1.0, Http.metric(scrape, "lmcache_mp_engine_driven_failures_total", "op", "prepare_store", "reason", "unknown_instance"));
            assertEquals(2.0, Http.metric(scrape, "lmcache_mp_engine_driven_failures_total", "op", "commit_store", "reason", "no_reservation"));
            assertEquals(1.0, Http.metric(scrape, "lmcache_mp_engine_driven_failures_total", "op", "commit_retrieve", "reason", "no_reservation"));
            assertEquals(1.0, Http.metric(scrape, "lmcache_mp_engine_driven_failures_total", "op", "commit_store", "reason", "pickle_data"));
        }
    }
}
