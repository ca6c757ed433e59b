package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.PythonClient;
import io.lmcache.server.testing.ServerExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * STORE and RETRIEVE round trips for CPU workers whose KV tensors live in real POSIX shared memory,
 * driven by the Python client that builds requests exactly as LMCache's does: register, store 2
 * chunks, zero the blocks, lookup + query = 2, retrieve into other blocks, bytes equal; a partial
 * third chunk not stored; skip_first_n_tokens; misses; world size 2; re-registration.
 */
class DataPathIT {
    @RegisterExtension
    static final ServerExtension SERVER = ServerExtension.withFlags("--l1-size-gb", "0.5", "--max-gpu-workers", "4", "--max-cpu-workers", "2");

    @ParameterizedTest
    @ValueSource(strings = {"roundtrip-nhd", "roundtrip-hnd", "roundtrip-mla", "roundtrip-flashinfer", "roundtrip-fused",
        "roundtrip-fused-hnd", "roundtrip-crosslayer"})
    void roundTrip(String scenario) {
        PythonClient.assertPasses(scenario, SERVER.endpoint());
    }

    @Test
    void eightConcurrentClientsWithDistinctPrefixes() {
        PythonClient.assertPasses("concurrent", SERVER.endpoint());
    }

    @Test
    void badInputIsAnsweredFalseAndCounted() {
        String scrapeBefore = Http.get(SERVER.httpBase() + "/metrics").body();
        PythonClient.assertPasses("badinput-datapath", SERVER.endpoint());
        String scrape = Http.get(SERVER.httpBase() + "/metrics").body();
        for (String reason : new String[] {"bad_block_ids", "tensors_gone", "bad_range", "unknown_instance"}) {
            double before = Http.metric(scrapeBefore, "lmcache_mp_transfer_failures_total", "reason", reason);
            double after = Http.metric(scrape, "lmcache_mp_transfer_failures_total", "reason", reason);
            assertTrue(after > before, "counter for " + reason + ": " + before + " -> " + after);
        }
        assertTrue(SERVER.server().isAlive());
        // and the server still serves a full round trip afterwards
        PythonClient.assertPasses("roundtrip-nhd", SERVER.endpoint());
    }
}
