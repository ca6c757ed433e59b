package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
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
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * A STORE is visible to every request the server receives after its reply, with the timing of LMCache's adapter on a GPU
 * host: the STORE is answered before its copy completes (here the GPU path's test double, {@code --test-hooks}'s
 * {@code /test/delay-copy-completions}, holds the commit back), and the scheduler's LOOKUP for the next request with the
 * same prefix comes at once, from another connection. The LOOKUP stays pending until the write commits and then hits every
 * chunk; a write that fails leaves the prefix before it; a RETRIEVE sent before the commit returns the stored bytes.
 */
@ExtendWith(ServerLogOnFailure.class)
class StoreVisibilityIT {
    private static final int CHUNK = 256;
    private static final int BLOCKS_PER_CHUNK = CHUNK / 16;
    /** 4 layers x 4 heads x 64, blocks of 16: 8 KiB pieces, 512 KiB chunk objects. */
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(4, 8 * BLOCKS_PER_CHUNK, 16, 4, 64);
    /** Long enough that the LOOKUP sent after the reply surely arrives before the commit, even on a loaded CI machine. */
    private static final long DELAY_MS = 2_000;

    private static ServerProcess server() {
        return ServerProcess.start(Map.of(), "--l1-size-gb", "0.25", "--test-hooks");
    }

    private static void delayCompletions(ServerProcess server, long delayMs, int failStores) {
        assertEquals(200, Http.post(server.httpBase() + "/test/delay-copy-completions?delay_ms=" + delayMs + "&fail_stores=" + failStores,
                "").statusCode());
    }

    private static double counter(ServerProcess server, String name, String... labels) {
        return Http.metric(server, name, labels);
    }

    @Test
    void aLookupFromAnotherConnectionRightAfterTheStoreReplyHitsEveryChunk() {
        try (ServerProcess server = server();
             JavaWorker worker = new JavaWorker(server.endpoint(), 21, "visible/model", GEOMETRY);
             TestClient scheduler = new TestClient(server.endpoint())) {
            worker.register();
            int[] blocks = JavaWorker.range(0, 4 * BLOCKS_PER_CHUNK);
            worker.fill(blocks, 7);
            int[] tokens = JavaWorker.tokens(2601, 4 * CHUNK);
            delayCompletions(server, DELAY_MS, 0);
            assertTrue(worker.store(tokens, 0, 4 * CHUNK, blocks, "store-1"), "the STORE is accepted (answered before its commit)");
            // the scheduler's LOOKUP and its first status query, at once and on their own connection
            TestClient.Reply ack = scheduler.call(8, worker.key(tokens, 0, 4 * CHUNK, "next-1", null, 1, 1), TestClient.pack(p -> p.packInt(1)));
            assertNull(ack.payload(), "LOOKUP is acknowledged without a payload");
            TestClient.Reply first = scheduler.call(9, TestClient.pack(p -> p.packString("next-1")));
            assertNull(first.payload(), "while the STORE's chunks are being written the prefetch is still running (None), not 0 hits");
            assertEquals(4, awaitHits(scheduler, "next-1"), "once the write commits every chunk is a hit");
            assertTrue(counter(server, "lmcache_mp_l1_lookups_after_writes_total") >= 1, "the LOOKUP waited for the write in flight");
            assertEquals(0, counter(server, "lmcache_mp_l1_write_lock_expiries_total"), "no write lock expired: the commit came");
            JsonNode delay = statusJson(server).path("store_commit_delay").path("cpu");
            assertTrue(delay.path("commits").asLong() >= 1, "/status shows the commit delay: " + delay);
            assertTrue(delay.has("p50_seconds") && delay.has("p99_seconds"), "/status shows p50 and p99: " + delay);
            assertTrue(counter(server, "lmcache_mp_store_commit_delay_seconds_count", "device", "cpu") >= 1, "the histogram is exported");
        }
    }

    @Test
    void aLookupAcrossTpRanksWaitsForEveryRanksWrite() {
        try (ServerProcess server = server();
             JavaWorker rank0 = new JavaWorker(server.endpoint(), 31, "tp/model", GEOMETRY);
             JavaWorker rank1 = new JavaWorker(server.endpoint(), 32, "tp/model", GEOMETRY);
             JavaWorker scheduler = new JavaWorker(server.endpoint(), 33, "tp/model", GEOMETRY)) {
            rank0.register();
            rank1.register();
            int[] blocks = JavaWorker.range(0, 2 * BLOCKS_PER_CHUNK);
            rank0.fill(blocks, 11);
            rank1.fill(blocks, 12);
            int[] tokens = JavaWorker.tokens(2605, 2 * CHUNK);
            assertTrue(rank0.store(tokens, 0, 2 * CHUNK, blocks, "tp", 0, 2), "rank 0's write commits at once");
            delayCompletions(server, DELAY_MS, 0);
            assertTrue(rank1.store(tokens, 0, 2 * CHUNK, blocks, "tp", 1, 2), "rank 1's STORE is answered before its commit");
            assertEquals(2, scheduler.lookup(tokens, 2 * CHUNK, "tp-next", 2, 0), "both ranks' chunks once rank 1's write commits");
            assertTrue(counter(server, "lmcache_mp_l1_lookups_after_writes_total") >= 1, "the LOOKUP waited for rank 1's write");
        }
    }

    @Test
    void withAnL2TierTheLookupFindsTheWriteInL1AndTheWriteThroughFollowsTheCommit(@TempDir Path dir) {
        String fsNative = "{\"type\":\"fs_native\",\"base_path\":\"" + dir + "\"}";
        try (ServerProcess server = ServerProcess.start(Map.of(), "--l1-size-gb", "0.25", "--test-hooks", "--l2-adapter", fsNative);
             JavaWorker worker = new JavaWorker(server.endpoint(), 34, "l2/model", GEOMETRY);
             JavaWorker scheduler = new JavaWorker(server.endpoint(), 35, "l2/model", GEOMETRY)) {
            worker.register();
            int[] blocks = JavaWorker.range(0, 4 * BLOCKS_PER_CHUNK);
            worker.fill(blocks, 13);
            int[] tokens = JavaWorker.tokens(2606, 4 * CHUNK);
            delayCompletions(server, DELAY_MS, 0);
            assertTrue(worker.store(tokens, 0, 4 * CHUNK, blocks, "l2-store"));
            assertEquals(0, counter(server, "lmcache_mp_l2_store_completed_objects_chunks_total"), "nothing goes to L2 before the commit");
            assertEquals(4, scheduler.lookup(tokens, 4 * CHUNK, "l2-next", 1, 0), "every chunk, from L1, once the write commits");
            assertEquals(4 * CHUNK, counter(server, "lmcache_mp_lookup_hit_l1_tokens_total"), "the hit is L1's");
            assertEquals(0, counter(server, "lmcache_mp_lookup_hit_l2_tokens_total"), "no chunk was loaded from L2");
            await().atMost(Duration.ofSeconds(20)).until(() -> counter(server, "lmcache_mp_l2_store_completed_objects_chunks_total") >= 4);
        }
    }

    @Test
    void aWriteThatFailsAfterItsReplyLeavesThePrefixBeforeIt() {
        try (ServerProcess server = server();
             JavaWorker worker = new JavaWorker(server.endpoint(), 22, "failing/model", GEOMETRY);
             JavaWorker scheduler = new JavaWorker(server.endpoint(), 23, "failing/model", GEOMETRY)) {
            worker.register();
            int[] blocks = JavaWorker.range(0, 4 * BLOCKS_PER_CHUNK);
            worker.fill(blocks, 8);
            int[] tokens = JavaWorker.tokens(2602, 4 * CHUNK);
            assertTrue(worker.store(tokens, 0, 2 * CHUNK, JavaWorker.range(0, 2 * BLOCKS_PER_CHUNK), "head"), "the first two chunks commit at once");
            delayCompletions(server, DELAY_MS, 1);
            assertTrue(worker.store(tokens, 2 * CHUNK, 4 * CHUNK, JavaWorker.range(2 * BLOCKS_PER_CHUNK, 2 * BLOCKS_PER_CHUNK), "tail"),
                    "the tail's STORE is answered before its copy (which will fail) completes");
            assertEquals(2, scheduler.lookup(tokens, 4 * CHUNK, "after-failure", 1, 0), "the failed write shrinks the hit as a miss would");
            assertTrue(counter(server, "lmcache_mp_l1_lookups_after_writes_total") >= 1, "the LOOKUP waited for the failing write");
            delayCompletions(server, 0, 0);
            assertEquals(2, scheduler.lookup(tokens, 4 * CHUNK, "later", 1, 0), "the failed chunks are not stored");
        }
    }

    @Test
    void aRetrieveSentBeforeTheCommitReturnsTheStoredBytes() {
        try (ServerProcess server = server();
             JavaWorker worker = new JavaWorker(server.endpoint(), 24, "early/model", GEOMETRY)) {
            worker.register();
            int[] source = JavaWorker.range(0, 2 * BLOCKS_PER_CHUNK);
            int[] target = JavaWorker.range(4 * BLOCKS_PER_CHUNK, 2 * BLOCKS_PER_CHUNK);
            worker.fill(source, 9);
            worker.zero(target);
            int[] tokens = JavaWorker.tokens(2603, 2 * CHUNK);
            delayCompletions(server, DELAY_MS, 0);
            assertTrue(worker.store(tokens, 0, 2 * CHUNK, source, "store"));
            assertTrue(worker.retrieve(tokens, 0, 2 * CHUNK, target, 0, "retrieve"), "the RETRIEVE is ordered after the write, not refused");
            assertArrayEquals(worker.read(source), worker.read(target), "the RETRIEVE returned the bytes the STORE wrote");
            assertTrue(counter(server, "lmcache_mp_l1_reads_after_writes_total") >= 1, "the RETRIEVE met the write in flight and waited");
        }
    }

    @Test
    void aRetrieveOfAWriteThatFailsAnswersFalse() {
        try (ServerProcess server = server();
             JavaWorker worker = new JavaWorker(server.endpoint(), 25, "early-fail/model", GEOMETRY)) {
            worker.register();
            int[] source = JavaWorker.range(0, BLOCKS_PER_CHUNK);
            int[] target = JavaWorker.range(2 * BLOCKS_PER_CHUNK, BLOCKS_PER_CHUNK);
            worker.fill(source, 10);
            worker.zero(target);
            int[] tokens = JavaWorker.tokens(2604, CHUNK);
            delayCompletions(server, DELAY_MS, 1);
            assertTrue(worker.store(tokens, 0, CHUNK, source, "store"));
            assertFalse(worker.retrieve(tokens, 0, CHUNK, target, 0, "retrieve"), "a read of a write that failed is a miss");
            byte[] zeros = new byte[worker.read(target).length];
            assertTrue(Arrays.equals(zeros, worker.read(target)), "nothing was copied into the target blocks");
        }
    }

    private static JsonNode statusJson(ServerProcess server) {
        try {
            return new ObjectMapper().readTree(Http.get(server.httpBase() + "/status").body());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** QUERY_PREFETCH_STATUS until it answers a count. */
    private static int awaitHits(TestClient scheduler, String requestId) {
        int[] hits = new int[1];
        await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(10)).until(() -> {
            TestClient.Reply reply = scheduler.call(9, TestClient.pack(p -> p.packString(requestId)));
            if (reply.payload() == null) {
                return false;
            }
            hits[0] = Integer.parseInt(reply.payloadHex(), 16);
            return true;
        });
        return hits[0];
    }
}
