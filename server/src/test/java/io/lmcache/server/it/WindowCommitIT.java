package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * LMCache's window commit on the real server (issue 28 item 5): a hybrid model (a full-attention and a 2-chunk sliding-window
 * object group) over an fs_native L2 with {@code --l2-store-policy full_attention_only}, so the write-through stores the
 * full-attention objects only and nothing but the commit can put a window in L2. A turn cut by its length cap commits nothing; a
 * turn that stopped on the boundary token has exactly its last window (2 chunks) in L2 right after its END_SESSION, and L1 keeps it.
 */
@ExtendWith(ServerLogOnFailure.class)
class WindowCommitIT {
    private static final int CHUNK = 256;
    private static final int BLOCKS_PER_CHUNK = CHUNK / 16;
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(2, 8 * BLOCKS_PER_CHUNK, 16, 2, 64);
    private static final String MODEL = "commit/hybrid";
    private static final int IM_END = 151645;
    private static final String COMPLETED = "lmcache_mp_l2_store_completed_objects_chunks_total";
    private static final String FLUSHED = "lmcache_mp_l2_store_flushed_objects_chunks_total";

    @Test
    void aTurnThatStoppedOnItsBoundaryTokenHasItsLastWindowInL2RightAfterEndSession(@TempDir Path dir) {
        String fsNative = "{\"type\":\"fs_native\",\"base_path\":\"" + dir + "\"}";
        try (ServerProcess server = ServerProcess.start(Map.of(), "--l1-size-gb", "0.25", "--l2-adapter", fsNative,
                "--l2-store-policy", "full_attention_only", "--commit-policy", "stop_token", "--commit-boundary-tokens", String.valueOf(IM_END));
             JavaWorker worker = new JavaWorker(server.endpoint(), 61, MODEL, GEOMETRY)) {
            worker.registerSlidingWindow(2 * CHUNK);
            int[] blocks = JavaWorker.range(0, 4 * BLOCKS_PER_CHUNK);
            worker.fill(blocks, 5);
            int[] tokens = JavaWorker.tokens(90, 4 * CHUNK);
            assertEquals(0, worker.lookup(tokens, 2 * CHUNK, "turn-1", 1, 1), "a new prompt: nothing cached");
            assertTrue(worker.store(tokens, 0, 4 * CHUNK, new int[][] {blocks, blocks}, "turn-1"));
            await().atMost(Duration.ofSeconds(20)).until(() -> Http.metric(server, COMPLETED) == 4
                    && Http.metric(server, "lmcache_mp_l2_store_skipped_objects_chunks_total", "reason", "sliding_window") == 4);

            worker.endSession("turn-1", "length", IM_END);
            JsonNode declined = status(server);
            assertEquals(1, declined.path("declined").asInt(), "a turn cut by its length cap ended mid-turn: no commit");
            assertEquals(0, Http.metric(server, FLUSHED));

            // the follow-up turn re-sends the prompt and stores its answer; it ends on <|im_end|>
            assertEquals(2, worker.lookup(tokens, 2 * CHUNK, "turn-2", 1, 1), "the prompt's two chunks hit L1");
            worker.freeLookupLocks(tokens, 0, 2 * CHUNK, "turn-2");
            assertTrue(worker.store(tokens, 0, 4 * CHUNK, new int[][] {blocks, blocks}, "turn-2"));
            worker.endSession("turn-2", "stop", IM_END);
            assertEquals(2, Http.metric(server, FLUSHED), "the sliding-window group's last 2 chunks (its window), rank 0");
            await().atMost(Duration.ofSeconds(10)).until(() -> Http.metric(server, COMPLETED) == 4 + 2);
            JsonNode committed = status(server);
            assertEquals(1, committed.path("commits").asInt());
            assertEquals(0, committed.path("missing_objects").asInt());
            assertEquals(0, committed.path("open_sessions").asInt(), "END_SESSION forgets the request");
            assertEquals(4 * 2, Http.metric(server, "lmcache_mp_l1_write_chunks_total"), "a copy, not a move: L1 still holds both groups");
        }
    }

    private static JsonNode status(ServerProcess server) {
        try {
            return new ObjectMapper().readTree(Http.get(server.httpBase() + "/status").body()).path("storage_manager").path("window_commit");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
