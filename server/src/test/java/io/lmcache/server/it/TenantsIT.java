package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.PythonClient;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Tenant identity and the hash chain end to end, through the Python client that speaks as LMCache's: a STORE under a cache
 * salt and request tags is found only by a LOOKUP with the same salt and tag set (scenario {@code tenants}); a tag LMCache
 * refuses fails its request and is counted; {@code --hash-algorithm sha256_cbor} with {@code PYTHONHASHSEED=0} serves the
 * same round trips.
 */
@ExtendWith(ServerLogOnFailure.class)
class TenantsIT {

    @Test
    void saltsAndTagsSeparateTenantsAndABadTagIsRefusedAndCounted() {
        try (ServerProcess server = ServerProcess.start()) {
            assertTrue(Http.get(server.httpBase() + "/status").body().contains("\"hash_algorithm\":\"blake3\""), "LMCache's default chain");
            PythonClient.assertPasses("tenants", server.endpoint());
            // the invalid tag's STORE and LOOKUP: refused at decode, counted by reason, the server still serving (the PING)
            assertEquals(2.0, Http.metric(server, "lmcache_mp_bad_requests_total", "reason", "bad_tag"));
        }
    }

    @Test
    void sha256CborWithPythonHashSeedZeroServesEndToEnd() {
        try (ServerProcess server = ServerProcess.start(Map.of("PYTHONHASHSEED", "0"), "--hash-algorithm", "sha256_cbor")) {
            assertTrue(Http.get(server.httpBase() + "/status").body().contains("\"hash_algorithm\":\"sha256_cbor\""),
                    "the chain the keys are hashed with");
            PythonClient.assertPasses("roundtrip-nhd", server.endpoint());
            PythonClient.assertPasses("tenants", server.endpoint());
        }
    }
}
