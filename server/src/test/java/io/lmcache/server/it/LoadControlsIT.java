package io.lmcache.server.it;

import static io.lmcache.server.testing.TestClient.pack;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * A LOOKUP's load controls on the real server (issue 28 item 6), over counters: {@code lmcache.skip_load} answers 0 and locks
 * nothing; {@code lmcache.hint.engine_computed_tokens} (the prefix vLLM's own cache holds) counts as hit, is touched in L1 and L2
 * without a lock or a load, and only the rest is locked (from L1) or prefetched (from an fs_native L2).
 */
@ExtendWith(ServerLogOnFailure.class)
class LoadControlsIT {
    private static final int CHUNK = 256;
    private static final int CHUNKS = 4;
    private static final int BLOCKS_PER_CHUNK = CHUNK / 16;
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(2, 8 * BLOCKS_PER_CHUNK, 16, 2, 64);
    private static final String MODEL = "load/model";
    private static final String COVERED = "lmcache_mp_lookup_covered_touched_objects_total";
    private static final String ASKED_OF_L2 = "lmcache_mp_l2_prefetch_lookup_objects_chunks_total";

    @Test
    void skipLoadAnswersZeroAndTheCoveredPrefixIsTouchedNotLockedNorPrefetched(@TempDir Path dir) {
        String fsNative = "{\"type\":\"fs_native\",\"base_path\":\"" + dir + "\"}";
        try (ServerProcess server = ServerProcess.start(Map.of(), "--l1-size-gb", "0.25", "--l2-adapter", fsNative);
             JavaWorker worker = new JavaWorker(server.endpoint(), 71, MODEL, GEOMETRY)) {
            worker.register();
            int[] blocks = JavaWorker.range(0, CHUNKS * BLOCKS_PER_CHUNK);
            worker.fill(blocks, 3);
            int[] tokens = JavaWorker.tokens(55, CHUNKS * CHUNK);
            assertTrue(worker.store(tokens, 0, CHUNKS * CHUNK, blocks, "store"));
            await().atMost(Duration.ofSeconds(20)).until(() -> Http.metric(server, "lmcache_mp_l2_store_completed_objects_chunks_total") == CHUNKS);

            assertEquals(0, lookup(worker, tokens, "skip", Map.of("lmcache.skip_load", true)), "the engine recomputes");
            assertEquals(0, readLocked(server), "and nothing is locked");
            assertEquals(1, Http.metric(server, "lmcache_mp_lookup_early_exit_requests_total", "reason", "load_policy_recompute"));
            assertEquals(CHUNKS, lookup(worker, tokens, "served", Map.of("lmcache.skip_load", false)), "false: served as usual");
            worker.endSession("served");

            // vLLM holds the first 2 chunks (and 100 tokens of the third: only whole chunks count)
            Map<String, Object> covered = Map.of("lmcache.hint.engine_computed_tokens", 2 * CHUNK + 100);
            assertEquals(CHUNKS, lookup(worker, tokens, "l1", covered), "the covered prefix counts as hit");
            assertEquals(CHUNKS - 2, readLocked(server), "only the chunks vLLM will retrieve are locked");
            assertEquals(2, Http.metric(server, COVERED, "tier", "l1"), "the covered chunks were touched in L1");
            worker.endSession("l1");
            assertEquals(0, readLocked(server));

            clearL1(server);
            double asked = Http.metric(server, ASKED_OF_L2);
            double touchedL2 = Http.metric(server, COVERED, "tier", "l2");
            assertEquals(CHUNKS, lookup(worker, tokens, "l2", covered), "the rest loads from L2");
            assertEquals(CHUNKS - 2, Http.metric(server, ASKED_OF_L2) - asked, "L2 was asked for the uncovered chunks only");
            assertEquals(CHUNKS - 2, Http.metric(server, "lmcache_mp_l1_objects"), "and only they were loaded into L1");
            assertEquals(CHUNKS - 2, readLocked(server), "locked for the RETRIEVE that follows");
            assertEquals(2, Http.metric(server, COVERED, "tier", "l2") - touchedL2, "the covered keys were touched in L2");
            worker.endSession("l2");
        }
    }

    private static int lookup(JavaWorker worker, int[] tokens, String requestId, Map<String, Object> configs) {
        TestClient client = worker.client();
        assertNull(client.call(8, worker.lookupKey(tokens, CHUNKS * CHUNK, requestId, configs), pack(p -> p.packInt(1))).payload());
        int[] hits = {-1};
        await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(5)).until(() -> {
            TestClient.Reply reply = client.call(9, pack(p -> p.packString(requestId)));
            if (reply.payload() != null) {
                hits[0] = Integer.parseInt(reply.payloadHex(), 16);
            }
            return reply.payload() != null;
        });
        return hits[0];
    }

    private static void clearL1(ServerProcess server) {
        await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(20)).until(() -> {
            assertEquals(200, Http.post(server.httpBase() + "/cache/clear", "{\"tier\": \"l1\"}").statusCode());
            return Http.metric(server, "lmcache_mp_l1_objects") == 0;
        });
    }

    private static int readLocked(ServerProcess server) {
        try {
            return new ObjectMapper().readTree(Http.get(server.httpBase() + "/status").body()).path("storage_manager").path("l1_managers")
                    .path("default").path("read_locked_count").asInt(-1);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
