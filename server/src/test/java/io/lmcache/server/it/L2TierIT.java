package io.lmcache.server.it;

import static io.lmcache.server.testing.TestClient.pack;
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
import io.lmcache.server.testing.LmcacheL2;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.UserDefinedFileAttributeView;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

/**
 * The L2 tier on the real server (issue 15): write-through to fs_native, a restart that finds the
 * files again, LOOKUPs that load from L2 and RETRIEVEs that return the exact bytes, a truncated file
 * that is a miss, and fault_inject's gaps. Waits are bounded and assert on counters.
 */
@ExtendWith(ServerLogOnFailure.class)
class L2TierIT {
    private static final int CHUNK = 256;
    private static final int CHUNKS = 4;
    /** 2 layers x 2 heads x 64, blocks of 16: 4 KiB pieces, 256 KiB chunk objects. */
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(2, 128, 16, 2, 64);
    private static final int[] STORED = JavaWorker.range(0, CHUNKS * CHUNK / 16);
    private static final String MODEL = "org/l2-model";
    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path dir;

    private static final int[] TOKENS = JavaWorker.tokens(15, CHUNKS * CHUNK);
    private static final byte[] HASHES = LmcacheL2.serverChunkHashes(TOKENS, CHUNK, CHUNKS);

    private String fsNative() {
        return "{\"type\":\"fs_native\",\"base_path\":\"" + dir + "\"}";
    }

    private String faultInject(String knobs) {
        return "{\"type\":\"fault_inject\"," + knobs + ",\"inner\":" + fsNative() + "}";
    }

    private static ServerProcess server(String adapter, String... more) {
        List<String> args = new ArrayList<>(List.of("--l1-size-gb", "0.0625", "--l2-adapter", adapter));
        args.addAll(List.of(more));
        return ServerProcess.start(args.toArray(String[]::new));
    }

    /** Registers a worker whose blocks 0..63 hold the 4 chunks' data (the same bytes in every process: a fixed seed). */
    private static JavaWorker worker(ServerProcess server, long instanceId) {
        JavaWorker worker = new JavaWorker(server.endpoint(), instanceId, MODEL, GEOMETRY);
        worker.register();
        worker.fill(STORED, 77);
        return worker;
    }

    /** Stores the 4 chunks and waits until the adapter has all of them. */
    private static void storeThrough(ServerProcess server, JavaWorker worker) {
        double before = Http.metric(server, "lmcache_mp_l2_store_completed_objects_chunks_total");
        assertTrue(worker.store(TOKENS, 0, CHUNKS * CHUNK, STORED, "store"));
        await("write-through").atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(20))
                .until(() -> Http.metric(server, "lmcache_mp_l2_store_completed_objects_chunks_total") >= before + CHUNKS);
    }

    /** Empties L1, so what a LOOKUP hits next comes from L2. */
    private static void clearL1(ServerProcess server) {
        await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(20)).until(() -> {
            assertEquals(200, Http.post(server.httpBase() + "/cache/clear", "{\"tier\": \"l1\"}").statusCode());
            return Http.metric(server, "lmcache_mp_l1_objects") == 0;
        });
    }

    /** LOOKUP as the scheduler sends it, then QUERY_PREFETCH_STATUS until it answers a count (None while the prefetch runs). */
    private static int lookup(JavaWorker worker, String requestId) {
        TestClient client = worker.client();
        assertNull(client.call(8, worker.key(TOKENS, 0, CHUNKS * CHUNK, requestId, null, 1, 1), pack(p -> p.packInt(1))).payload());
        int[] hits = {-1};
        await("prefetch of " + requestId).atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(5)).until(() -> {
            TestClient.Reply reply = client.call(9, pack(p -> p.packString(requestId)));
            if (reply.payload() != null) {
                hits[0] = Integer.parseInt(reply.payloadHex(), 16);
            }
            return reply.payload() != null;
        });
        return hits[0];
    }

    /** RETRIEVEs the first {@code chunks} chunks into blocks 64.. and compares them with the stored blocks. */
    private static void assertRetrievesExactly(JavaWorker worker, int chunks, String requestId) {
        int[] target = JavaWorker.range(64, chunks * CHUNK / 16);
        worker.zero(target);
        assertTrue(worker.retrieve(TOKENS, 0, chunks * CHUNK, target, 0, requestId), "RETRIEVE of " + chunks + " chunk(s)");
        assertArrayEquals(worker.read(JavaWorker.range(0, chunks * CHUNK / 16)), worker.read(target), "byte-exact");
    }

    @Test
    void aRestartFindsTheChunksInL2AndRetrievesThemByteExact() throws Exception {
        byte[] stored;
        try (ServerProcess first = server(fsNative()); JavaWorker worker = worker(first, 1)) {
            stored = worker.read(STORED);
            storeThrough(first, worker);
            assertEquals(CHUNKS * GEOMETRY.chunkObjectBytes(CHUNK), Http.metric(first, "lmcache_mp_l2_store_bytes_total"));
        }
        try (Stream<Path> files = Files.list(dir)) {
            // LMCache's names: packed kv rank of world size 1, rank 0; object group 0; the 32-byte hash
            assertEquals(CHUNKS, files.filter(f -> f.getFileName().toString().matches("org-SEP-l2-model@0x01000100@0@[0-9a-f]{64}\\.data"))
                    .count());
        }
        List<byte[]> written = new ArrayList<>();
        for (int c = 0; c < CHUNKS; c++) {
            written.add(Files.readAllBytes(file(c)));
        }
        assertArrayEquals(stored, LmcacheL2.asWorkerBlocks(GEOMETRY, CHUNK, written),
                "the files are LMCache's KV_2LTD objects of the stored blocks");
        try (ServerProcess second = server(fsNative()); JavaWorker worker = worker(second, 2)) {
            assertEquals(0, Http.metric(second, "lmcache_mp_l1_objects"), "a new process: L1 is empty");
            // the files of the first run are counted at start (in the background)
            await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(20)).until(() -> JSON.readTree(Http.get(second.httpBase()
                    + "/status").body()).get("storage_manager").get("l2_adapters").get(0).get("used_bytes").asLong()
                    == CHUNKS * GEOMETRY.chunkObjectBytes(CHUNK));
            assertEquals(CHUNKS * GEOMETRY.chunkObjectBytes(CHUNK), Http.metric(second, "lmcache_mp_l2_usage_bytes", "l2_name", "fs_native"),
                    "and shown by LMCache's usage gauge");
            assertEquals(CHUNKS, lookup(worker, "after-restart"));
            String scrape = Http.get(second.httpBase() + "/metrics").body();
            for (String series : List.of("lmcache_mp_l2_prefetch_timeout_requests_total", "lmcache_mp_l2_prefetch_rejected_requests_total",
                    "lmcache_mp_l2_store_skipped_objects_chunks_total")) {
                assertTrue(Pattern.compile("^" + series + "(\\{[^}]*\\})? 0\\.0$", Pattern.MULTILINE).matcher(scrape).find(),
                        series + " exported, at zero:\n" + scrape);
            }
            assertEquals(0, Http.metric(second, "lmcache_mp_num_inflight_l2_loads"), "the load answered: no longer in flight");
            assertEquals(0, Http.metric(second, "lmcache_mp_inflight_load_memory_usage_bytes"));
            assertEquals(CHUNKS * CHUNK, Http.metric(second, "lmcache_mp_lookup_hit_l2_tokens_total"));
            assertEquals(0, Http.metric(second, "lmcache_mp_lookup_hit_l1_tokens_total"));
            assertEquals(CHUNKS, Http.metric(second, "lmcache_mp_l2_prefetch_load_completed_chunks_total"));
            assertRetrievesExactly(worker, CHUNKS, "after-restart");
            // the loaded objects were temporary: the RETRIEVE gave back their only read locks, and they left L1
            await().atMost(Duration.ofSeconds(5)).until(() -> Http.metric(second, "lmcache_mp_l1_objects") == 0);
            assertEquals(CHUNKS, Http.metric(second, "lmcache_mp_l1_evicted_chunks_total", "reason", "prefetch_released"));
            JsonNode storage = JSON.readTree(Http.get(second.httpBase() + "/status").body()).get("storage_manager");
            assertEquals(1, storage.get("num_l2_adapters").asInt());
            assertEquals("FSNativeL2Adapter", storage.get("l2_adapters").get(0).get("type").asText());
            assertEquals(0, storage.get("store_controller").get("failed_task_count").asInt());
            assertEquals(1, storage.get("prefetch_controller").get("completed_request_count").asInt());
        }
    }

    @Test
    void aTruncatedFileIsAMissNeverWrongBytes() throws Exception {
        try (ServerProcess server = server(fsNative()); JavaWorker worker = worker(server, 3)) {
            storeThrough(server, worker);
            clearL1(server);
            Path third = file(2);
            try (FileChannel channel = FileChannel.open(third, StandardOpenOption.WRITE)) {
                channel.truncate(Files.size(third) / 2);
            }
            assertEquals(2, lookup(worker, "truncated"), "chunk 2's file is short: the prefix ends before it");
            assertFalse(Files.exists(third), "the short file was removed");
            assertRetrievesExactly(worker, 2, "truncated");
        }
    }

    /** The file of chunk {@code chunk} under LMCache's name (the hash as the server keys chunks, {@link LmcacheL2#serverChunkHashes}). */
    private Path file(int chunk) {
        Path file = dir.resolve(LmcacheL2.fileName(MODEL, LmcacheL2.kvRank(1, 0), 0, LmcacheL2.hashHex(HASHES, chunk), ""));
        assertTrue(Files.isRegularFile(file), "chunk " + chunk + "'s file " + file.getFileName());
        return file;
    }

    /** Writes the chunks' objects of known KV the way LMCache's fs_native adapter does (its names, raw bytes), not through a server. */
    private List<byte[]> plantLmcacheDirectory() throws IOException {
        List<byte[]> objects = new ArrayList<>();
        for (int c = 0; c < CHUNKS; c++) {
            byte[] object = LmcacheL2.object(GEOMETRY, CHUNK, 500 + c);
            objects.add(object);
            Files.write(dir.resolve(LmcacheL2.fileName(MODEL, LmcacheL2.kvRank(1, 0), 0, LmcacheL2.hashHex(HASHES, c), "")), object);
        }
        return objects;
    }

    /** Waits until the start-up scan adopted {@code files} files of earlier runs (or of another server). */
    private static void awaitAdopted(ServerProcess server, int files) {
        await("start-up scan").atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(20)).until(() -> {
            JsonNode scan = JSON.readTree(Http.get(server.httpBase() + "/status").body()).get("storage_manager").get("l2_adapters").get(0)
                    .get("startup_scan");
            return "done".equals(scan.path("state").asText()) && scan.get("files").asInt() == files;
        });
    }

    @Test
    void aDirectoryWrittenTheWayLmcacheWritesItIsServedByteExact() throws Exception {
        List<byte[]> objects = plantLmcacheDirectory();
        try (ServerProcess server = server(fsNative()); JavaWorker worker = new JavaWorker(server.endpoint(), 11, MODEL, GEOMETRY)) {
            worker.register();
            awaitAdopted(server, CHUNKS);
            assertEquals(CHUNKS * GEOMETRY.chunkObjectBytes(CHUNK), Http.metric(server, "lmcache_mp_l2_usage_bytes", "l2_name", "fs_native"),
                    "LMCache's files are adopted: counted, evictable");
            assertEquals(CHUNKS, lookup(worker, "foreign"));
            int[] target = JavaWorker.range(64, CHUNKS * CHUNK / 16);
            worker.zero(target);
            assertTrue(worker.retrieve(TOKENS, 0, CHUNKS * CHUNK, target, 0, "foreign"), "RETRIEVE");
            assertArrayEquals(LmcacheL2.asWorkerBlocks(GEOMETRY, CHUNK, objects), worker.read(target), "LMCache's bytes, byte for byte");
            assertEquals(0, Http.metric(server, "lmcache_mp_l2_store_bytes_total"), "nothing written: the keys were there");
        }
    }

    @Test
    void aFileOfAnotherRecordedFormatOrSizeIsACountedMiss() throws Exception {
        List<byte[]> objects = plantLmcacheDirectory();
        Path second = file(1);
        Files.getFileAttributeView(second, UserDefinedFileAttributeView.class)
                .write("lmcache_format", StandardCharsets.UTF_8.encode("v1 torch.bfloat16[2,2,256,4x32];")); // 4 heads x 32: one size
        try (ServerProcess server = server(fsNative()); JavaWorker worker = new JavaWorker(server.endpoint(), 12, MODEL, GEOMETRY)) {
            worker.register();
            awaitAdopted(server, CHUNKS);
            assertEquals(1, lookup(worker, "layout"), "chunk 1's file records 4 heads x 32, the worker has 2 x 64: the prefix ends there");
            worker.endSession("layout");
            assertTrue(Http.metric(server, "lmcache_mp_l2_adapter_events_total", "event", "format_mismatch_layout") > 0);
            assertEquals(0, Http.metric(server, "lmcache_mp_l2_adapter_events_total", "event", "format_mismatch_size"));
            assertEquals(0, Http.metric(server, "lmcache_mp_l2_adapter_events_total", "event", "format_xattr_unsupported"));

            Files.delete(second);
            Files.write(second, new byte[(int) GEOMETRY.chunkObjectBytes(CHUNK) + 4096]); // another layout's object: bigger
            assertEquals(1, lookup(worker, "size"), "chunk 1's file is not the object's size: a miss");
            worker.endSession("size");
            assertTrue(Http.metric(server, "lmcache_mp_l2_adapter_events_total", "event", "format_mismatch_size") > 0);
            assertTrue(Files.isRegularFile(second), "a file of another size is kept: it is another layout's");

            Files.delete(second);
            Files.write(second, objects.get(1)); // LMCache's file again, no attribute
            assertEquals(CHUNKS, lookup(worker, "whole"));
            int[] target = JavaWorker.range(64, CHUNKS * CHUNK / 16);
            worker.zero(target);
            assertTrue(worker.retrieve(TOKENS, 0, CHUNKS * CHUNK, target, 0, "whole"), "RETRIEVE");
            assertArrayEquals(LmcacheL2.asWorkerBlocks(GEOMETRY, CHUNK, objects), worker.read(target));
        }
    }

    @Test
    void faultInjectTailRatioHalfLeavesTwoOfFourAndTheyAreExact() throws Exception {
        try (ServerProcess server = server(faultInject("\"gap_tail_ratios\":[0.5]")); JavaWorker worker = worker(server, 4)) {
            storeThrough(server, worker);
            clearL1(server);
            assertEquals(2, lookup(worker, "gap"), "round_half_even(0.5 * 3) = 2: the third chunk's load fails");
            assertEquals(1, Http.metric(server, "lmcache_mp_l2_prefetch_failure_chunks_total", "reason", "not_found"));
            assertRetrievesExactly(worker, 2, "gap");
            assertEquals(1, server.countLog("WARN.*FaultInjectL2Adapter ACTIVE \\(rate=0\\.000 seed=0 gap_indices=\\[\\] "
                    + "gap_tail_ratios=\\[0\\.5\\]\\) wrapping FSNativeL2Adapter -- test/diagnostic use only\\."), server.log());
            JsonNode adapter = JSON.readTree(Http.get(server.httpBase() + "/status").body()).get("storage_manager").get("l2_adapters").get(0);
            assertEquals("FSNativeL2Adapter", adapter.get("type").asText(), "the inner adapter's status");
            assertEquals(0.5, adapter.get("fault_inject").get("gap_tail_ratios").get(0).asDouble());
        }
    }

    @Test
    void faultInjectGapIndexZeroAndRateOneHitNothingRateZeroHitsAll() throws Exception {
        Map<String, Integer> expected = Map.of("\"gap_indices\":[0]", 0, "\"rate\":1.0", 0, "\"rate\":0.0", CHUNKS);
        int instance = 10;
        for (Map.Entry<String, Integer> knob : expected.entrySet()) {
            try (ServerProcess server = server(faultInject(knob.getKey())); JavaWorker worker = worker(server, instance++)) {
                storeThrough(server, worker);
                clearL1(server);
                assertEquals(knob.getValue(), lookup(worker, "knob"), knob.getKey());
                if (knob.getValue() > 0) {
                    assertRetrievesExactly(worker, knob.getValue(), "knob");
                } else {
                    worker.endSession("knob");
                }
                // whatever the load failed leaves nothing behind: no L1 object, no lock held in L2
                await().atMost(Duration.ofSeconds(5)).until(() -> Http.metric(server, "lmcache_mp_l1_objects") == 0);
                JsonNode adapter = JSON.readTree(Http.get(server.httpBase() + "/status").body()).get("storage_manager").get("l2_adapters")
                        .get(0);
                assertEquals(0, adapter.get("locked_keys").asInt(), knob.getKey());
            }
        }
    }

    @Test
    void anAdapterThatCannotBeParsedExitsTwoWithOneLine() throws Exception {
        ServerProcess server = ServerProcess.launch(Map.of(), "--l1-size-gb", "0.0625", "--l2-adapter", fsNative(), "--l2-adapter",
                "{\"type\":\"bogus\"}");
        assertTrue(server.process().waitFor(60, TimeUnit.SECONDS));
        server.close();
        assertEquals(2, server.process().exitValue());
        assertEquals("lmcache-server: error: --l2-adapter #1: unknown type 'bogus' (known: fs_native, fault_inject, resp, valkey, s3) (see --help)",
                server.log().strip());
    }

    @Test
    void aBasePathThatCannotBeCreatedExitsTwo() throws IOException, InterruptedException {
        Path file = Files.writeString(dir.resolve("a-file"), "x");
        ServerProcess server = ServerProcess.launch(Map.of(), "--l1-size-gb", "0.0625", "--l2-adapter",
                "{\"type\":\"fs_native\",\"base_path\":\"" + file.resolve("sub") + "\"}");
        assertTrue(server.process().waitFor(60, TimeUnit.SECONDS));
        server.close();
        assertEquals(2, server.process().exitValue());
        List<String> errors = server.log().lines().filter(line -> line.startsWith("lmcache-server: error:")).toList();
        assertEquals(1, errors.size(), server.log());
        assertTrue(errors.getFirst().startsWith("lmcache-server: error: --l2-adapter #0: cannot open fs_native: "), errors.getFirst());
    }
}
