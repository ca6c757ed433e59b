package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.PythonClient;
import io.lmcache.server.testing.ServerExtension;
import io.lmcache.server.testing.ServerProcess;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Hybrid models on the real server, driven by the Python client that encodes EngineGroupInfo as
 * LMCache's msgspec Struct does (issue 14's acceptance a-e): per-group block lists, object groups,
 * windows, Mamba snapshots, fp8 bytes, refusals and /status. Assertions on the L1 counters say how
 * many objects each scenario stored and read; the client checks every byte.
 */
class HybridIT {
    private static final String WRITES = "lmcache_mp_l1_write_chunks_total";
    private static final String READS = "lmcache_mp_l1_read_chunks_total";

    @RegisterExtension
    static final ServerExtension SERVER = ServerExtension.withFlags("--l1-size-gb", "0.5", "--max-gpu-workers", "2");

    @Test
    void twoGroupsInOneObjectGroupRoundTripByteExact() {
        try (ServerProcess server = ServerProcess.start("--no-separate-object-groups")) {
            PythonClient.assertPasses("hybrid-merged", server.endpoint());
            assertEquals(2, Http.metric(server, WRITES), "one object per chunk holds both groups' segments");
            assertEquals(4, Http.metric(server, READS), "two RETRIEVEs of two chunks");
            assertEquals(false, json(server.httpBase() + "/config").get("mp").get("separate_object_groups").asBoolean());
        }
    }

    @Test
    void aOneChunkWindowStoresOnlyItsNonNullChunksAndReadsOnlyInWindow() {
        double writes = Http.metric(SERVER.server(), WRITES);
        double reads = Http.metric(SERVER.server(), READS);
        PythonClient.assertPasses("hybrid-window", SERVER.endpoint());
        Awaits.until(() -> Http.metric(SERVER.server(), WRITES) - writes == 3 + 1);
        assertEquals(3 + 1, Http.metric(SERVER.server(), READS) - reads, "3 full-attention chunks and the window's last one");
    }

    @Test
    void mambaSnapshotsAreStoredWhereTheirIdsAreNotNullAtChunkSize544() {
        try (ServerProcess server = ServerProcess.start("--chunk-size", "544")) {
            PythonClient.assertPasses("hybrid-mamba", server.endpoint(), "--chunk-size", "544");
            // prefix a: 3 attention chunks + 1 snapshot; prefix b: 2 + 2; the short list stored nothing
            assertEquals(3 + 1 + 2 + 2, Http.metric(server, WRITES));
            assertEquals(3 + 1, Http.metric(server, READS), "the RETRIEVE read the last chunk's snapshot only");
            assertEquals(0, json(server.httpBase() + "/status").get("storage_manager").get("l1_managers").get("default")
                    .get("read_locked_count").asInt(), "END_SESSION gave back every lock the windowed LOOKUPs took");
        }
    }

    @Test
    void fp8CachesRoundTripAsOpaqueBytes() {
        double writes = Http.metric(SERVER.server(), WRITES);
        PythonClient.assertPasses("hybrid-fp8", SERVER.endpoint());
        Awaits.until(() -> Http.metric(SERVER.server(), WRITES) - writes == 2);
    }

    @Test
    void badGeometryIsRefusedAtRegisterAndTheServerKeepsServing() {
        double refused = Http.metric(SERVER.server(), "lmcache_mp_registration_failures_total");
        double failedStores = Http.metric(SERVER.server(), "lmcache_mp_transfer_failures_total", "reason", "registration_failed");
        PythonClient.assertPasses("hybrid-badgeometry", SERVER.endpoint());
        Awaits.until(() -> Http.metric(SERVER.server(), "lmcache_mp_registration_failures_total") - refused == 4);
        assertEquals(4, Http.metric(SERVER.server(), "lmcache_mp_transfer_failures_total", "reason", "registration_failed") - failedStores);
        assertTrue(SERVER.server().isAlive());
        PythonClient.assertPasses("hybrid-window", SERVER.endpoint());
    }

    @Test
    void statusReportsEveryKernelGroupAndTheCacheSizePerToken() {
        PythonClient.assertPasses("hybrid-status", SERVER.endpoint());
        JsonNode context = null;
        for (JsonNode entry : json(SERVER.httpBase() + "/status").get("cache_context_meta")) {
            if (entry.get("model_name").asText().equals("testclient/hybrid-status")) {
                context = entry;
            }
        }
        assertNotNull(context, "the registration stays until the instance is reaped");
        JsonNode layout = context.get("kv_cache_layout");
        assertEquals(5, layout.get("num_layers").asInt());
        // per chunk of 256: sliding 2 x 2 layers x 256 tokens x 128 x 2 B, full 2 x 2 x 256 x 256 x 2 B, Mamba 2 x 1 x 16 x 64 x 2 B
        long perChunk = 2L * 2 * 256 * 128 * 2 + 2L * 2 * 256 * 256 * 2 + 2L * 16 * 64 * 2;
        assertEquals(perChunk / 256, layout.get("cache_size_per_token").asLong());
        JsonNode kernels = layout.get("kernel_groups");
        assertEquals(3, kernels.size());
        for (JsonNode kernel : kernels) {
            for (String field : List.of("kernel_group_idx", "engine_group_idx", "object_group_idx", "num_layers", "layer_indices",
                    "tokens_per_block", "slots_per_block", "dtype", "engine_kv_concrete_shape", "is_mla", "engine_kv_format",
                    "engine_kv_shape", "attention_backend")) {
                assertTrue(kernel.has(field), "kernel_groups[]." + field);
            }
            assertEquals("torch.bfloat16", kernel.get("dtype").asText());
        }
        assertEquals(List.of(32, 16, 16), ints(kernels, "tokens_per_block"));
        assertEquals(List.of(0, 1, 2), ints(kernels, "object_group_idx"), "sliding, full and recurrent are separate object groups");
        assertEquals(List.of(0, 1, 2), ints(kernels, "engine_group_idx"));
        assertEquals("[0,2]", kernels.get(0).get("layer_indices").toString());
        assertEquals("2 x [2, 32, 32, 1, 128]", kernels.get(0).get("engine_kv_concrete_shape").asText());
        assertEquals(List.of(4, -1, 1), ints(layout.get("object_groups"), "window_chunks"));
    }

    private static List<Integer> ints(JsonNode array, String field) {
        List<Integer> out = new ArrayList<>();
        array.forEach(node -> out.add(node.get(field).asInt()));
        return out;
    }

    private static JsonNode json(String url) {
        try {
            return new ObjectMapper().readTree(Http.get(url).body());
        } catch (IOException e) {
            throw new AssertionError("not JSON from " + url, e);
        }
    }
}
