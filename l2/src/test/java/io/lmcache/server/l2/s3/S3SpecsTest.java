package io.lmcache.server.l2.s3;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.l2.L2AdapterSpecs;
import io.lmcache.server.l2.L2SpecException;
import java.net.URI;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The s3 JSON object as LMCache's {@code S3L2AdapterConfig.from_dict} reads it, and our refusals (one line each). */
class S3SpecsTest {
    private static S3Spec parse(String fields) throws L2SpecException {
        return (S3Spec) L2AdapterSpecs.parse("{\"type\":\"s3\"" + fields + "}", Map.of());
    }

    private static String error(String fields) {
        return assertThrows(L2SpecException.class, () -> parse(fields)).getMessage();
    }

    private static final String AWS = ",\"s3_endpoint\":\"s3://my-bucket.s3.us-east-1.amazonaws.com\",\"s3_region\":\"us-east-1\"";

    @Test
    void anAwsEndpointIsVirtualHostedOverTlsWithLmcachesDefaults() throws Exception {
        S3Spec spec = parse(AWS);
        assertEquals("my-bucket", spec.bucket());
        assertEquals("my-bucket.s3.us-east-1.amazonaws.com", spec.endpoint());
        assertEquals(URI.create("https://s3.us-east-1.amazonaws.com"), spec.connectUri());
        assertFalse(spec.pathStyle());
        assertFalse(spec.staticCredentials(), "no keys: the default chain");
        assertEquals(64, spec.numIoThreads());
        assertEquals(5_000_000_000L, spec.breakerInitialCooldownNs());
        assertEquals(300_000_000_000L, spec.breakerMaxCooldownNs());
        assertTrue(spec.warnings().isEmpty(), spec.warnings().toString());
    }

    @Test
    void aLocalhostEndpointIsReachedPathStyleAtLocalhostWithItsPort() throws Exception {
        S3Spec spec = parse(",\"s3_endpoint\":\"lmcache-kv.localhost:9000\",\"s3_region\":\"us-east-1\",\"disable_tls\":true");
        assertEquals("lmcache-kv", spec.bucket());
        assertEquals(URI.create("http://localhost:9000"), spec.connectUri());
        assertTrue(spec.pathStyle());
        S3Spec minio = parse(",\"s3_endpoint\":\"kv.minio.localhost:9000\",\"s3_region\":\"us-east-1\"");
        assertEquals(URI.create("https://localhost:9000"), minio.connectUri());
    }

    @Test
    void everyKeyLmcacheKnowsIsAccepted() throws Exception {
        S3Spec spec = parse(AWS + ",\"disable_tls\":false,\"aws_access_key_id\":\"AKIA\",\"aws_secret_access_key\":\"s3cret\","
                + "\"s3_num_io_threads\":8,\"s3_prefer_http2\":true,\"s3_enable_s3express\":false,\"max_capacity_gb\":2,"
                + "\"eviction\":{\"eviction_policy\":\"LRU\",\"trigger_watermark\":0.9,\"eviction_ratio\":0.1},"
                + "\"s3_breaker_initial_cooldown_s\":1.5,\"s3_breaker_max_cooldown_s\":60,\"s3_seed_usage_on_start\":false,"
                + "\"s3_persist_lru_index\":false,\"s3_lru_index_checkpoint_interval_s\":300,\"persist_enabled\":true");
        assertTrue(spec.staticCredentials());
        assertEquals(8, spec.numIoThreads());
        assertEquals(2L << 30, spec.maxCapacityBytes());
        assertEquals(1_500_000_000L, spec.breakerInitialCooldownNs());
        assertFalse(spec.toString().contains("s3cret"), "the secret is never shown");
        String shown = L2AdapterSpecs.redacted("{\"type\":\"s3\"" + AWS + ",\"aws_access_key_id\":\"AKIA\",\"aws_secret_access_key\":\"s3cret\"}");
        assertFalse(shown.contains("s3cret"), shown);
        assertTrue(shown.contains("\"aws_secret_access_key\":\"<set>\""), shown);
        assertEquals(1, parse(AWS + ",\"s3_seed_usage_on_start\":true").warnings().size(), "accepted, warned as without effect");
    }

    @Test
    void aBadSpecIsRefusedWithOneLineNamingTheKey() {
        assertEquals("s3: \"s3_region\" is required (the SigV4 signing region, e.g. \"us-east-1\")",
                error(",\"s3_endpoint\":\"b.example.com\""));
        assertTrue(error(",\"s3_region\":\"us-east-1\"").startsWith("s3: \"s3_endpoint\" is required"));
        assertTrue(error(AWS + ",\"aws_access_key_id\":\"AKIA\"").startsWith("s3: set both \"aws_access_key_id\" and"));
        assertTrue(error(AWS + ",\"s3_enable_s3express\":true").contains("s3_enable_s3express"));
        assertTrue(error(AWS + ",\"s3_breaker_initial_cooldown_s\":10,\"s3_breaker_max_cooldown_s\":5").contains("s3_breaker_max_cooldown_s"));
        assertTrue(error(AWS + ",\"s3_breaker_initial_cooldown_s\":0").contains("s3_breaker_initial_cooldown_s"));
        assertTrue(error(AWS + ",\"disable_tls\":\"yes\"").startsWith("\"disable_tls\" must be true or false"), "booleans are JSON booleans");
        assertTrue(error(AWS + ",\"s3_num_io_threads\":true").startsWith("\"s3_num_io_threads\" must be an integer"));
        assertTrue(error(AWS + ",\"s3_num_io_threads\":0").startsWith("\"s3_num_io_threads\" must be an integer"));
        assertEquals("s3: unknown key \"key_prefix\"", error(AWS + ",\"key_prefix\":\"fleet\""), "objects live at the bucket root");
        assertTrue(error(",\"s3_endpoint\":\"https://b.example.com\",\"s3_region\":\"us-east-1\"").contains("no scheme but s3://"));
        assertTrue(error(",\"s3_endpoint\":\"b.example.com/prefix\",\"s3_region\":\"us-east-1\"").contains("no path"));
        assertTrue(error(",\"s3_endpoint\":\"b.example.com:99999\",\"s3_region\":\"us-east-1\"").contains("port"));
    }

    @Test
    void aBucketWithoutAHostIsKeptAsLmcacheSendsItWithAWarning() throws Exception {
        S3Spec spec = parse(",\"s3_endpoint\":\"s3://my-bucket\",\"s3_region\":\"us-east-1\"");
        assertEquals("my-bucket", spec.bucket());
        assertEquals(URI.create("https://my-bucket"), spec.connectUri());
        assertEquals(1, spec.warnings().size());
    }
}
