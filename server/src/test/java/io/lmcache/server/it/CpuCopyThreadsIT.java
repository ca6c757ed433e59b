package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * CPU workers' copies spread over several copy threads ({@code --cpu-copy-threads}, issue 52) keep the host path's rules:
 * workers storing and retrieving at once each get back exactly their bytes, and a LOOKUP from another connection sent
 * right after a STORE's reply, and the RETRIEVE after it, see every chunk (the reply follows the last run's copy); with one
 * transfer lane and with several (each worker's copies then overlap the others'); the pieces go through the native
 * non-temporal copy ({@code transfer.StreamingCopy}, {@code /status} {@code cpu_copy}).
 */
@ExtendWith(ServerLogOnFailure.class)
class CpuCopyThreadsIT {
    private static final int CHUNK = 256;
    private static final int BLOCKS_PER_CHUNK = CHUNK / 16;
    private static final int CHUNKS = 2;
    /** 4 layers x 8 heads x 64, blocks of 16: 16 KiB pieces, 2 MiB chunk objects, 4 MiB a STORE (4 runs of 1 MiB). */
    private static final JavaWorker.Geometry GEOMETRY = new JavaWorker.Geometry(4, 2 * CHUNKS * BLOCKS_PER_CHUNK, 16, 8, 64);
    private static final int WORKERS = 3;
    private static final int ROUNDS = 3;

    @ParameterizedTest(name = "{0} transfer lane(s)")
    @ValueSource(strings = {"auto", "3"})
    void concurrentWorkersGetTheirOwnBytesAndARequestAfterTheReplySeesEveryChunk(String lanes) throws Exception {
        // auto: without a GPU one lane per 4 cores (one on a small host); 3: the workers' copies overlap on their own lanes
        List<String> flags = new ArrayList<>(List.of("--l1-size-gb", "0.25", "--cpu-copy-threads", "4"));
        if (!lanes.equals("auto")) {
            flags.addAll(List.of("--max-gpu-workers", lanes));
        }
        try (ServerProcess server = ServerProcess.start(flags.toArray(String[]::new))) {
            JsonNode config = new ObjectMapper().readTree(Http.get(server.httpBase() + "/config").body());
            assertEquals(lanes, config.findValue("max_gpu_workers").asText(), "/config says how the lanes were set");
            JsonNode cpuCopy = new ObjectMapper().readTree(Http.get(server.httpBase() + "/status").body()).get("cpu_copy");
            assertEquals(4, cpuCopy.get("threads").asInt(), cpuCopy.toString());
            // the build made the native copy (CI requires a C compiler): the pieces go through it, the rules below still hold
            assertTrue(cpuCopy.get("copy").asText().startsWith("native non-temporal stores"), cpuCopy.toString());
            ExecutorService threads = Executors.newFixedThreadPool(WORKERS);
            try {
                List<Future<?>> done = new ArrayList<>();
                for (int w = 0; w < WORKERS; w++) {
                    int worker = w;
                    done.add(threads.submit(() -> storeLookupRetrieve(server, worker)));
                }
                for (Future<?> future : done) {
                    future.get(120, TimeUnit.SECONDS);
                }
            } finally {
                threads.shutdownNow();
            }
            assertTrue(Http.metric(server, "lmcache_mp_host_copy_runs_total", "thread", "copy") > 0, "copy threads took runs");
            assertTrue(Http.metric(server, "lmcache_mp_host_copy_runs_total", "thread", "transfer") > 0, "transfer threads copied too");
            assertEquals(0, Http.metric(server, "lmcache_mp_transfer_failures_total"), "no transfer failed");
        }
    }

    /** One worker's rounds: STORE, a scheduler's LOOKUP on its own connection at once, RETRIEVE into other blocks, compare. */
    private static Void storeLookupRetrieve(ServerProcess server, int w) {
        try (JavaWorker worker = new JavaWorker(server.endpoint(), 40 + w, "copy/model-" + w, GEOMETRY);
             JavaWorker scheduler = new JavaWorker(server.endpoint(), 50 + w, "copy/model-" + w, GEOMETRY)) {
            worker.register();
            int[] source = JavaWorker.range(0, CHUNKS * BLOCKS_PER_CHUNK);
            int[] target = JavaWorker.range(CHUNKS * BLOCKS_PER_CHUNK, CHUNKS * BLOCKS_PER_CHUNK);
            for (int round = 0; round < ROUNDS; round++) {
                long seed = 1000L * w + round;
                worker.fill(source, seed);
                worker.zero(target);
                int[] tokens = JavaWorker.tokens(seed, CHUNKS * CHUNK);
                String request = "copy-" + w + "-" + round;
                assertTrue(worker.store(tokens, 0, CHUNKS * CHUNK, source, "store-" + request), "STORE " + request);
                assertEquals(CHUNKS, scheduler.lookup(tokens, CHUNKS * CHUNK, request, 1, 1), "the LOOKUP after the reply hits every chunk");
                assertTrue(worker.retrieve(tokens, 0, CHUNKS * CHUNK, target, 0, request), "RETRIEVE " + request);
                assertArrayEquals(worker.read(source), worker.read(target), "worker " + w + " round " + round + ": byte for byte");
            }
        }
        return null;
    }
}
