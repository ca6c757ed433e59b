package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.PythonClient;
import io.lmcache.server.testing.ServerExtension;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 47's CPU shapes on the real server: SGLang's MP connector (two TP ranks sharing a request id, K-then-V pools, placeholder
 * pages, malformed registrations), vLLM's layer-wise ops (answered, never left waiting), {@code num_kv_readers} 0 read as one
 * read lock, decorated model names byte for byte in fs_native names, and two servers each seeing only their own ranks. The
 * Python client checks every byte; the assertions here are on counters.
 */
@ExtendWith(ServerLogOnFailure.class)
class NewestClientsIT {
    private static final int CHUNK = 256;
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(2, 64, 16, 2, 64);
    private static final ObjectMapper JSON = new ObjectMapper();

    @RegisterExtension
    static final ServerExtension SERVER = ServerExtension.withFlags("--l1-size-gb", "0.25");

    @TempDir
    Path dir;

    private static double metric(String name, String... labels) {
        return Http.metric(SERVER.server(), name, labels);
    }

    @Test
    void sglangShapedRanksRoundTripByteExactAndEveryMalformedShapeIsAnswered() {
        double refusedRegistrations = metric("lmcache_mp_registration_failures_total");
        double nullPages = metric("lmcache_mp_transfer_failures_total", "reason", "null_page");
        PythonClient.assertPasses("sglang", SERVER.endpoint());
        PythonClient.assertPasses("sglang-mla", SERVER.endpoint());
        // an odd pool count, no tokens_per_block, 5 frames without hints
        assertEquals(3, metric("lmcache_mp_registration_failures_total") - refusedRegistrations);
        assertEquals(2, metric("lmcache_mp_transfer_failures_total", "reason", "null_page") - nullPages,
                "a STORE naming page 0 and a RETRIEVE with a placeholder after real pages");
    }

    @Test
    void layerwiseOpsAreAnsweredAsWithoutLayerwiseMode() {
        String refused = "lmcache_mp_layerwise_requests_refused_total";
        double pools = metric(refused, "op", "register_layerwise_ipc_event_pool", "reason", "mode_off");
        double retrieves = metric(refused, "op", "retrieve_layerwise", "reason", "mode_off");
        PythonClient.assertPasses("layerwise", SERVER.endpoint());
        // the two malformed ones are answered by their failure value before any handler runs
        assertEquals(1, metric(refused, "op", "register_layerwise_ipc_event_pool", "reason", "mode_off") - pools);
        assertEquals(1, metric(refused, "op", "retrieve_layerwise", "reason", "mode_off") - retrieves);
    }

    @Test
    void aLookupWithoutNumKvReadersHoldsOneReadLockPerHitObject() throws Exception {
        int[] tokens = JavaWorker.tokens(47, 2 * CHUNK);
        int[] blocks = JavaWorker.range(0, 2 * CHUNK / 16);
        try (JavaWorker worker = new JavaWorker(SERVER.endpoint(), 4701, "org/readers", GEOMETRY)) {
            worker.register();
            worker.fill(blocks, 3);
            assertTrue(worker.store(tokens, 0, 2 * CHUNK, blocks, "readers-store"));
            int locked = readLocked(SERVER.server());
            assertEquals(2, worker.lookupAndQuery(tokens, 2 * CHUNK, "readers-0", 1, 0), "num_kv_readers 0");
            assertEquals(locked + 2, readLocked(SERVER.server()), "0 is read as 1: both hit chunks are read-locked until their RETRIEVE");
            worker.endSession("readers-0");
            assertEquals(locked, readLocked(SERVER.server()), "END_SESSION gave them back");
        }
    }

    @Test
    void aDecoratedModelNameAppearsVerbatimInFsNativeNames() throws Exception {
        String decorations = "##lmcache-dcp-layout-v1-d4-interleave4##lmcache-kv-dtype-v1-0123456789abcdef0123456789abcdef";
        String model = "org/glm-5.3-flash" + decorations;
        int[] tokens = JavaWorker.tokens(48, CHUNK);
        int[] blocks = JavaWorker.range(0, CHUNK / 16);
        try (ServerProcess server = ServerProcess.start("--l1-size-gb", "0.0625", "--l2-adapter",
                "{\"type\":\"fs_native\",\"base_path\":\"" + dir + "\"}"); JavaWorker worker = new JavaWorker(server.endpoint(), 4702, model, GEOMETRY)) {
            worker.register();
            worker.fill(blocks, 5);
            assertTrue(worker.store(tokens, 0, CHUNK, blocks, "decorated"));
            await("write-through").atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(20))
                    .until(() -> Http.metric(server, "lmcache_mp_l2_store_completed_objects_chunks_total") >= 1);
            try (Stream<Path> files = Files.list(dir)) {
                List<String> names = files.map(f -> f.getFileName().toString()).toList();
                // LMCache's fs_native spells '/' as -SEP- and keeps every other character of the model name
                assertTrue(names.stream().anyMatch(n -> n.startsWith("org-SEP-glm-5.3-flash" + decorations + "@0x01000100@0@")), names.toString());
            }
        }
    }

    @Test
    void twoServersEachServeOnlyTheirOwnRanks() throws Exception {
        // lmcache.mp.server_urls: rank r of a TP-2 model talks only to server r, as kv rank 0 of a world of 1 there
        int[] tokens = JavaWorker.tokens(49, CHUNK);
        int[] blocks = JavaWorker.range(0, CHUNK / 16);
        int[] target = JavaWorker.range(CHUNK / 16, CHUNK / 16);
        try (ServerProcess other = ServerProcess.start("--l1-size-gb", "0.0625");
                JavaWorker a = new JavaWorker(SERVER.endpoint(), 4703, "org/multi", GEOMETRY);
                JavaWorker b = new JavaWorker(other.endpoint(), 4704, "org/multi", GEOMETRY)) {
            a.register();
            b.register();
            a.fill(blocks, 11);
            b.fill(blocks, 12);
            assertTrue(a.store(tokens, 0, CHUNK, blocks, "multi-a"));
            assertTrue(b.store(tokens, 0, CHUNK, blocks, "multi-b"));
            assertEquals(1, a.lookup(tokens, CHUNK, "multi-a", 1, 1));
            assertEquals(1, b.lookup(tokens, CHUNK, "multi-b", 1, 1));
            assertTrue(a.retrieve(tokens, 0, CHUNK, target, 0, "multi-a"));
            assertTrue(b.retrieve(tokens, 0, CHUNK, target, 0, "multi-b"));
            assertArrayEquals(a.read(blocks), a.read(target), "server A gives back rank A's shard");
            assertArrayEquals(b.read(blocks), b.read(target), "server B gives back rank B's shard");
            assertEquals(0, a.lookup(tokens, CHUNK, "multi-a2", 2, 1), "a world of 2 on one server: its rank 1 is on the other");
        }
    }

    private static int readLocked(ServerProcess server) throws Exception {
        return JSON.readTree(Http.get(server.httpBase() + "/status").body()).get("storage_manager").get("l1_managers").get("default")
                .get("read_locked_count").asInt();
    }
}
