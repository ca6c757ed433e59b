package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.PythonClient;
import io.lmcache.server.testing.ServerExtension;
import io.lmcache.server.testing.ServerLogOnFailure;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * LMCache's layer-wise mode ({@code --layerwise-batch 2}) on the real server with CPU workers: LMCache has no layer-wise
 * retrieval for them (no event backend), so the pool is {@code (0, [])}, every RETRIEVE_LAYERWISE gets its closing frame, and a
 * per-chunk RETRIEVE is refused as LMCache's layer-wise module refuses it. The Python client (scenario {@code layerwise-mode})
 * checks the frames and that nothing was written; the assertions here are on the counters. The layer-wise copy itself
 * runs on the GPU host (testclient/gpu/layerwise_check.py).
 */
@ExtendWith(ServerLogOnFailure.class)
class LayerwiseModeIT {
    private static final String REFUSED = "lmcache_mp_layerwise_requests_refused_total";

    @RegisterExtension
    static final ServerExtension SERVER = ServerExtension.withFlags("--l1-size-gb", "0.25", "--layerwise-batch", "2");

    private static double metric(String name, String... labels) {
        return Http.metric(SERVER.server(), name, labels);
    }

    @Test
    void everyLayerwiseRequestOfACpuWorkerIsAnsweredAndAPerChunkRetrieveRefused() {
        String pool = "register_layerwise_ipc_event_pool";
        double cpuPools = metric(REFUSED, "op", pool, "reason", "unsupported");
        double unknownPools = metric(REFUSED, "op", pool, "reason", "unknown_instance");
        double cpuRetrieves = metric(REFUSED, "op", "retrieve_layerwise", "reason", "unsupported");
        double unknownRetrieves = metric("lmcache_mp_transfer_failures_total", "op", "retrieve_layerwise", "reason", "unknown_instance");
        double perChunk = metric(REFUSED, "op", "retrieve", "reason", "per_chunk_in_layerwise_mode");
        double batches = metric("lmcache_mp_layerwise_batches_total");

        PythonClient.assertPasses("layerwise-mode", SERVER.endpoint());

        assertEquals(1, metric(REFUSED, "op", pool, "reason", "unsupported") - cpuPools, "the CPU worker's pool: (0, [])");
        assertEquals(1, metric(REFUSED, "op", pool, "reason", "unknown_instance") - unknownPools);
        // the CPU worker's retrieve and its one with a 10-byte event (refused for the worker before its event is read); the
        // two undecodable ones are answered by the op's failure value before any handler runs
        assertEquals(2, metric(REFUSED, "op", "retrieve_layerwise", "reason", "unsupported") - cpuRetrieves);
        assertEquals(1, metric("lmcache_mp_transfer_failures_total", "op", "retrieve_layerwise", "reason", "unknown_instance")
                - unknownRetrieves);
        assertEquals(1, metric(REFUSED, "op", "retrieve", "reason", "per_chunk_in_layerwise_mode") - perChunk);
        assertEquals(0, metric("lmcache_mp_layerwise_batches_total") - batches, "no layer batch without CUDA events");
    }
}
