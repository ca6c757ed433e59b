package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.LmcacheL2;
import io.lmcache.server.testing.PythonClient;
import io.lmcache.server.testing.ServerProcess;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * DeepSeek-V4(-Flash, V4.1)-shaped workers on the real server through the CPU shared-memory path (issue 48), driven by the
 * Python client that encodes EngineGroupInfo with group_view.py's V4.1 fields: byte-exact round trips per group, sub-chunk
 * windows that move only the window's blocks, a hit that needs every required group, the scratch ring never touched, and the
 * L2 objects under LMCache's names (keys.h key_to_filename, worked by {@link LmcacheL2}) with LMCache's bytes (the concatenated
 * {@code [1, layers, kept slots, hidden]} segments the client computes from its tensors).
 */
class DeepSeekIT {
    private static final String WRITES = "lmcache_mp_l1_write_chunks_total";
    private static final String READS = "lmcache_mp_l1_read_chunks_total";
    private static final int CHUNK = 256;

    @TempDir
    Path dir;

    @Test
    void v4FlashRoundTripsPerGroupAndItsL2ObjectsAreLmcaches() throws IOException {
        Path l2 = Files.createDirectories(dir.resolve("l2"));
        Path out = dir.resolve("out");
        try (ServerProcess server = ServerProcess.start("--l1-size-gb", "0.5",
                "--l2-adapter", "{\"type\":\"fs_native\",\"base_path\":\"" + l2 + "\"}")) {
            PythonClient.assertPasses("deepseek-v4", server.endpoint(), "--out-dir", out.toString());
            // chunk 0: the full-attention object only (the window group's ids there were null); chunk 1: both
            assertEquals(3, Http.metric(server, WRITES));
            assertEquals(2 * (1 + 2), Http.metric(server, READS), "each RETRIEVE: the window group's last object, both full ones");
            JsonNode expect = new ObjectMapper().readTree(out.resolve("expect.json").toFile());
            int[] tokens = new int[expect.get("tokens").size()];
            for (int i = 0; i < tokens.length; i++) {
                tokens[i] = expect.get("tokens").get(i).asInt();
            }
            byte[] hashes = LmcacheL2.serverChunkHashes(tokens, CHUNK, 2);
            String model = expect.get("model").asText();
            int rank = LmcacheL2.kvRank(1, 0);
            for (int og = 0; og < 2; og++) {
                Path file = l2.resolve(LmcacheL2.fileName(model, rank, og, LmcacheL2.hashHex(hashes, 1), ""));
                Awaits.until(() -> Files.exists(file));
                assertArrayEquals(Files.readAllBytes(out.resolve("og" + og + "-chunk1.bin")), Files.readAllBytes(file),
                        "object group " + og + " of chunk 1: LMCache's bytes");
            }
            Path chunk0Full = l2.resolve(LmcacheL2.fileName(model, rank, 1, LmcacheL2.hashHex(hashes, 0), ""));
            Awaits.until(() -> Files.exists(chunk0Full));
            assertFalse(Files.exists(l2.resolve(LmcacheL2.fileName(model, rank, 0, LmcacheL2.hashHex(hashes, 0), ""))),
                    "the window group's chunk 0 was never stored");
        }
    }

    @Test
    void v41SkipsItsScratchRingAndServesTheRest() {
        try (ServerProcess server = ServerProcess.start("--l1-size-gb", "0.5", "--chunk-size", "256", "--separate-object-groups")) {
            PythonClient.assertPasses("deepseek-v41", server.endpoint());
            assertEquals(2 * 2, Http.metric(server, WRITES), "2 chunks of 2 object groups; the scratch ring has none");
            assertEquals(1 + 2, Http.metric(server, READS), "the window's last object and both full-attention objects");
            assertEquals(1, Http.metric(server, "lmcache_mp_transfer_failures_total", "reason", "bad_block_ids"),
                    "a STORE without the scratch ring's list is refused");
        }
    }
}
