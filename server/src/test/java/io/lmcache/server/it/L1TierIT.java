package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The L1 tier through the protocol: a full pool keeps serving, locks hold under pressure, start-up does not wait for the pool. */
@ExtendWith(ServerLogOnFailure.class)
class L1TierIT {
    private static final int CHUNK = 256;
    /** 8 layers x 8 heads x 128, blocks of 16: 32 KiB pieces, 8 MiB chunk objects. */
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(8, 32, 16, 8, 128);
    private static final int[] CHUNK_BLOCKS = JavaWorker.range(0, CHUNK / 16);
    private static final ObjectMapper JSON = new ObjectMapper();

    private static int[] prefix(int i) {
        int[] tokens = JavaWorker.tokens(1000 + i, CHUNK);
        tokens[0] = i;
        return tokens;
    }

    @Test
    void aOneGibPoolTakesFourGibOfChunks() throws Exception {
        try (ServerProcess server = ServerProcess.start(Map.of(), "--l1-size-gb", "1");
             JavaWorker worker = new JavaWorker(server.endpoint(), 11, "fill/model", GEOMETRY)) {
            worker.register();
            worker.fill(CHUNK_BLOCKS, 1);
            double heapBefore = Http.metric(server, "jvm_memory_used_bytes", "area", "heap");
            int chunks = (int) ((4L << 30) / GEOMETRY.chunkObjectBytes(CHUNK));
            for (int i = 0; i < chunks; i++) {
                assertTrue(worker.store(prefix(i), 0, CHUNK, CHUNK_BLOCKS, "fill-" + i), "STORE " + i + " of " + chunks + " succeeds");
            }
            for (int i = chunks - 10; i < chunks; i++) {
                assertEquals(1, worker.lookup(prefix(i), CHUNK, "new-" + i, 1, 0), "newest chunk " + i + " hits");
            }
            for (int i = 0; i < 10; i++) {
                assertEquals(0, worker.lookup(prefix(i), CHUNK, "old-" + i, 1, 0), "oldest chunk " + i + " was evicted");
            }
            long rssBytes = rssBytes(server.pid());
            assertTrue(rssBytes <= (1L << 30) + (512L << 20), "RSS " + (rssBytes >> 20) + " MiB stays within the pool + 512 MiB");
            double heapAfter = Http.metric(server, "jvm_memory_used_bytes", "area", "heap");
            assertTrue(heapAfter - heapBefore < 64 * (1 << 20), "heap " + (long) heapBefore / (1 << 20) + " -> "
                    + (long) heapAfter / (1 << 20) + " MiB after storing 4 GiB: the data is off-heap");
            // the newest chunk's bytes come back intact
            int[] target = JavaWorker.range(16, 16);
            assertTrue(worker.retrieve(prefix(chunks - 1), 0, CHUNK, target, 0, "check"));
            assertArrayEquals(worker.read(CHUNK_BLOCKS), worker.read(target));
        }
    }

    @Test
    void aLookupLockedChunkSurvivesPressureUntilItsLocksAreFreed() {
        try (ServerProcess server = ServerProcess.start(Map.of(), "--l1-size-gb", "0.125");
             JavaWorker worker = new JavaWorker(server.endpoint(), 12, "lock/model", GEOMETRY)) {
            worker.register();
            worker.fill(CHUNK_BLOCKS, 2);
            int[] locked = prefix(-1);
            assertTrue(worker.store(locked, 0, CHUNK, CHUNK_BLOCKS, "locked"));
            assertEquals(1, worker.lookup(locked, CHUNK, "req-locked", 1, 1));
            for (int i = 0; i < 64; i++) {
                assertTrue(worker.store(prefix(i), 0, CHUNK, CHUNK_BLOCKS, "pressure-" + i));
            }
            int[] target = JavaWorker.range(16, 16);
            assertTrue(worker.retrieve(locked, 0, CHUNK, target, 0, "probe"), "the locked chunk survived 4x the pool of stores");
            worker.freeLookupLocks(locked, 0, CHUNK, "req-locked");
            for (int i = 64; i < 128; i++) {
                assertTrue(worker.store(prefix(i), 0, CHUNK, CHUNK_BLOCKS, "pressure-" + i));
            }
            assertFalse(worker.retrieve(locked, 0, CHUNK, target, 0, "probe2"), "once freed, it is evicted like any other");
        }
    }

    @Test
    void aLookupLockExpiresAtItsTtl() {
        try (ServerProcess server = ServerProcess.start(Map.of(), "--l1-size-gb", "0.125", "--l1-read-ttl-seconds", "2");
             JavaWorker worker = new JavaWorker(server.endpoint(), 13, "ttl/model", GEOMETRY)) {
            worker.register();
            worker.fill(CHUNK_BLOCKS, 3);
            int[] locked = prefix(-2);
            assertTrue(worker.store(locked, 0, CHUNK, CHUNK_BLOCKS, "locked"));
            assertEquals(1, worker.lookup(locked, CHUNK, "req-ttl", 1, 1));
            double expiriesBefore = readLockExpiries(server);
            int[] target = JavaWorker.range(16, 16);
            int[] next = {0};
            // keep the pool under pressure; the chunk stays until the lock's 2 s TTL is reclaimed
            await().atMost(Duration.ofSeconds(15)).pollInterval(Duration.ofMillis(200)).until(() -> {
                for (int i = 0; i < 20; i++) {
                    assertTrue(worker.store(prefix(1000 + next[0]++), 0, CHUNK, CHUNK_BLOCKS, "p"));
                }
                return !worker.retrieve(locked, 0, CHUNK, target, 0, "probe");
            });
            // it went because its lock was reclaimed at the TTL (a locked chunk is never evicted, see above)
            assertEquals(expiriesBefore + 1, readLockExpiries(server), "exactly the one lookup lock expired");
        }
    }

    /**
     * A STORE whose pool has room for only some of its chunks: the chunks before the first without room are stored and
     * readable (a later one could never be a prefix hit), the rest are not, and the reply is false, counted as no_memory.
     */
    @Test
    void aStoreWithRoomForPartOfItsChunksKeepsThoseAndAnswersFalse() {
        JavaWorker.Geometry wide = new JavaWorker.Geometry(8, 96, 16, 8, 128); // 8 MiB objects, blocks for 3 chunks and a copy
        // noop: nothing is ever evicted, so the room is exactly what the test leaves (a full pool under LRU would let the
        // background eviction take the chunks this test stores before its LOOKUP sees them, a race a loaded machine loses)
        try (ServerProcess server = ServerProcess.start(Map.of(), "--l1-size-gb", "0.0625", "--eviction-policy", "noop");
             JavaWorker worker = new JavaWorker(server.endpoint(), 14, "partial/model", wide)) {
            worker.register();
            worker.fill(CHUNK_BLOCKS, 4);
            // how many objects the pool holds: store until one finds no room, then empty it
            int capacity = 0;
            while (worker.store(prefix(-100 - capacity), 0, CHUNK, CHUNK_BLOCKS, "probe-" + capacity)) {
                capacity++;
                assertTrue(capacity <= 8, "a 64 MiB pool holds at most eight 8 MiB objects");
            }
            assertTrue(capacity >= 2, "the pool held " + capacity + " chunks");
            assertEquals(200, Http.post(server.httpBase() + "/cache/clear", "{\"tier\": \"l1\"}").statusCode());
            // leave room for exactly two objects
            for (int i = 0; i < capacity - 2; i++) {
                assertTrue(worker.store(prefix(-200 - i), 0, CHUNK, CHUNK_BLOCKS, "filler-" + i));
            }
            double noMemory = Http.metric(server, "lmcache_mp_transfer_failures_total", "op", "store", "reason", "no_memory");
            int[] tokens = JavaWorker.tokens(77, 3 * CHUNK);
            int[] source = JavaWorker.range(0, 48);
            worker.fill(source, 5);
            assertFalse(worker.store(tokens, 0, 3 * CHUNK, source, "three"), "the third chunk found no room");
            assertEquals(noMemory + 1, Http.metric(server, "lmcache_mp_transfer_failures_total", "op", "store", "reason", "no_memory"));
            long decodedBefore = statusLong(server, "token_ids_reused");
            long hashedBefore = statusLong(server, "chunk_hashes_reused");
            assertEquals(2, worker.lookup(tokens, 3 * CHUNK, "probe", 1, 0), "the two chunks that found room were stored");
            // the LOOKUP's key is the STORE's tokens: decoded and hashed once (the STORE's chain completed after its stop)
            assertEquals(decodedBefore + 3 * CHUNK, statusLong(server, "token_ids_reused"));
            assertEquals(hashedBefore + 3, statusLong(server, "chunk_hashes_reused"));
            int[] target = JavaWorker.range(48, 32);
            assertTrue(worker.retrieve(tokens, 0, 2 * CHUNK, target, 0, "back"));
            assertArrayEquals(worker.read(JavaWorker.range(0, 32)), worker.read(target), "their bytes come back");
            // a RETRIEVE pins each chunk as its pieces go out: the first two are copied before the third is found missing, and
            // the reply is false with every pin given back
            double notFound = Http.metric(server, "lmcache_mp_transfer_failures_total", "op", "retrieve", "reason", "not_found");
            int[] three = JavaWorker.range(48, 48);
            worker.fill(three, 6);
            byte[] untouched = worker.read(JavaWorker.range(80, 16));
            assertFalse(worker.retrieve(tokens, 0, 3 * CHUNK, three, 0, "all"), "the third chunk was not stored");
            assertEquals(notFound + 1, Http.metric(server, "lmcache_mp_transfer_failures_total", "op", "retrieve", "reason", "not_found"));
            assertEquals(0, storageLong(server, "pinned_count"), "no pin outlives the failed RETRIEVE");
            assertArrayEquals(worker.read(JavaWorker.range(0, 32)), worker.read(JavaWorker.range(48, 32)),
                    "the chunks before the missing one were copied as they were pinned");
            assertArrayEquals(untouched, worker.read(JavaWorker.range(80, 16)), "the missing chunk's blocks are not written");
            // a prefix whose first chunk is missing copies nothing
            int[] first = JavaWorker.range(48, 16);
            byte[] before = worker.read(first);
            assertFalse(worker.retrieve(JavaWorker.tokens(78, CHUNK), 0, CHUNK, first, 0, "never-stored"));
            assertArrayEquals(before, worker.read(first));
            assertEquals(notFound + 2, Http.metric(server, "lmcache_mp_transfer_failures_total", "op", "retrieve", "reason", "not_found"));
        }
    }

    private static long storageLong(ServerProcess server, String field) {
        try {
            return JSON.readTree(Http.get(server.httpBase() + "/status").body()).get("storage_manager").get("l1_manager").get(field).asLong();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * Start-up does not wait for the pool: GET_CHUNK_SIZE is answered while the 16 GiB are still
     * being prepared (how long after launch is a benchmark figure, not a test).
     */
    @Test
    void sixteenGibAnswersWhileItsPoolIsStillBeingPrepared() throws Exception {
        try (ServerProcess server = ServerProcess.launch(Map.of(), "--l1-size-gb", "16");
             TestClient client = new TestClient(server.endpoint())) {
            assertEquals("cd0100", client.call(21).payloadHex());
            JsonNode preparation = poolPreparation(server);
            long total = preparation.get("regions_total").asLong();
            assertTrue(preparation.get("regions_prepared").asLong() < total, "answered before the pool was ready: " + preparation);
            // and the preparation goes on in the background
            await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(100))
                    .until(() -> poolPreparation(server).get("regions_prepared").asLong() > 0);
            JsonNode prepared = poolPreparation(server);
            assertEquals("", prepared.get("error").asText());
            assertTrue(prepared.get("threads").asInt() >= 1, "threads preparing: " + prepared);
            assertTrue(prepared.get("huge_pages").isBoolean(), "whether the host gives this pool huge pages: " + prepared);
        }
    }

    private static long statusLong(ServerProcess server, String field) {
        try {
            return JSON.readTree(Http.get(server.httpBase() + "/status").body()).get(field).asLong();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static JsonNode poolPreparation(ServerProcess server) throws IOException {
        JsonNode status = JSON.readTree(Http.get(server.httpBase() + "/status").body());
        return status.get("storage_manager").get("l1_managers").get("default").get("pool_preparation");
    }

    private static double readLockExpiries(ServerProcess server) {
        return Http.metric(server, "lmcache_mp_l1_lock_expiries_total", "kind", "read");
    }

    static long rssBytes(long pid) throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
            }
        }
        throw new IllegalStateException("no VmRSS for " + pid);
    }
}
