package io.lmcache.server.l2.s3;

import static io.lmcache.server.l2.SpecFields.bool;
import static io.lmcache.server.l2.SpecFields.integer;
import static io.lmcache.server.l2.SpecFields.number;
import static io.lmcache.server.l2.SpecFields.text;

import com.fasterxml.jackson.databind.JsonNode;
import io.lmcache.server.l2.L2AdapterSpec;
import io.lmcache.server.l2.L2SpecException;
import io.lmcache.server.l2.SpecFields;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;

/**
 * The {@code s3} JSON object, read as LMCache's {@code S3L2AdapterConfig.from_dict} reads it (LMCache/LMCache
 * {@code lmcache/v1/distributed/l2_adapters/s3_l2_adapter.py} @000e8777; breaker fields from {@code docs/source/mp/l2_storage/s3.rst}
 * @60b1c83f): every key it knows is accepted, an unknown key, a missing endpoint or region, a half-set key pair or a bad cooldown
 * stops the start with one line, before any connection is tried.
 */
final class S3Specs {
    private static final long GIB = 1L << 30;
    private static final long NS_PER_S = 1_000_000_000L;
    /** LMCache's defaults: 64 CRT event-loop threads (here: values in flight), breaker 5 s re-armed, doubling to 300 s. */
    private static final int NUM_IO_THREADS = 64;
    private static final double BREAKER_INITIAL_S = 5.0;
    private static final double BREAKER_MAX_S = 300.0;
    private static final Set<String> KEYS = Set.of("s3_endpoint", "s3_region", "disable_tls", "aws_access_key_id", "aws_secret_access_key",
            "s3_num_io_threads", "s3_prefer_http2", "s3_enable_s3express", "max_capacity_gb", "s3_breaker_initial_cooldown_s",
            "s3_breaker_max_cooldown_s", "s3_seed_usage_on_start", "s3_persist_lru_index", "s3_lru_index_checkpoint_interval_s");

    private S3Specs() {}

    static S3Spec parse(JsonNode node) throws L2SpecException {
        SpecFields.unknownKeys(node, "s3", SpecFields.GENERIC, KEYS);
        SpecFields.noSerde(node);
        List<String> warnings = new ArrayList<>();
        String region = text(node, "s3_region", "").strip();
        boolean disableTls = bool(node, "disable_tls", false);
        Endpoint endpoint = endpoint(text(node, "s3_endpoint", ""), disableTls, warnings);
        if (region.isEmpty()) {
            throw new L2SpecException("s3: \"s3_region\" is required (the SigV4 signing region, e.g. \"us-east-1\")");
        }
        String keyId = text(node, "aws_access_key_id", "");
        String secret = text(node, "aws_secret_access_key", "");
        if (keyId.isEmpty() != secret.isEmpty()) {
            // LMCache falls back to the default chain silently; a half-set pair is far likelier a typo than a wish for the chain
            throw new L2SpecException("s3: set both \"aws_access_key_id\" and \"aws_secret_access_key\", or neither (the default"
                    + " credential chain: environment, ~/.aws, container, instance)");
        }
        int ioThreads = (int) integer(node, "s3_num_io_threads", NUM_IO_THREADS, 1, 1024);
        bool(node, "s3_prefer_http2", true); // accepted: HTTP/1.1 keep-alive connections here
        if (bool(node, "s3_enable_s3express", false)) {
            throw new L2SpecException("s3: \"s3_enable_s3express\": true (S3 Express One Zone signing) is not supported by this server");
        }
        double initialS = number(node, "s3_breaker_initial_cooldown_s", BREAKER_INITIAL_S, Double.MIN_VALUE, 1e6);
        double maxS = number(node, "s3_breaker_max_cooldown_s", BREAKER_MAX_S, Double.MIN_VALUE, 1e6);
        if (maxS < initialS) {
            throw new L2SpecException("s3: \"s3_breaker_max_cooldown_s\" (" + maxS + ") must be >= \"s3_breaker_initial_cooldown_s\" ("
                    + initialS + ")");
        }
        for (String key : List.of("s3_seed_usage_on_start", "s3_persist_lru_index")) {
            if (bool(node, key, false)) {
                warnings.add("s3: \"" + key + "\" is accepted and has no effect here (usage counts the objects this process stores)");
            }
        }
        integer(node, "s3_lru_index_checkpoint_interval_s", 300, 1, Integer.MAX_VALUE);
        double capacityGb = number(node, "max_capacity_gb", 0, 0, 1 << 30);
        L2AdapterSpec.EvictionSpec eviction = SpecFields.eviction(node.get("eviction"));
        if (eviction != null && eviction.lru() && capacityGb == 0) {
            warnings.add("s3: an \"eviction\" block needs max_capacity_gb > 0 to evict anything");
        }
        return new S3Spec(endpoint.hostPort, endpoint.bucket, endpoint.connectUri, endpoint.pathStyle, region, disableTls, keyId, secret,
                ioThreads, (long) (capacityGb * GIB), (long) (initialS * NS_PER_S), (long) (maxS * NS_PER_S),
                bool(node, "persist_enabled", true), eviction, warnings);
    }

    private record Endpoint(String hostPort, String bucket, URI connectUri, boolean pathStyle) {}

    /**
     * {@code [s3://]<bucket>.<host>[:port]}: virtual-hosted, the bucket the first label (LMCache's docstring; its requests carry
     * this as {@code Host}). A host under {@code .localhost} is loopback (RFC 6761 §6.3) but Java's resolver does not know it, so
     * such an endpoint is reached path-style at {@code localhost}, which S3Proxy and MinIO serve alike.
     */
    static Endpoint endpoint(String value, boolean disableTls, List<String> warnings) throws L2SpecException {
        String raw = value.strip();
        String hostPort = raw.startsWith("s3://") ? raw.substring("s3://".length()) : raw;
        if (raw.isEmpty()) {
            throw new L2SpecException("s3: \"s3_endpoint\" is required (\"<bucket>.<host>[:port]\", e.g."
                    + " \"my-bucket.s3.us-east-1.amazonaws.com\")");
        }
        if (hostPort.isEmpty() || hostPort.contains("/") || hostPort.contains("@") || hostPort.chars().anyMatch(Character::isWhitespace)) {
            throw new L2SpecException("s3: \"s3_endpoint\" must be \"<bucket>.<host>[:port]\" (virtual-hosted; no scheme but s3://, no"
                    + " path), got '" + L2SpecException.clip(value) + "'");
        }
        int colon = hostPort.lastIndexOf(':');
        String host = colon < 0 ? hostPort : hostPort.substring(0, colon);
        int port = -1;
        if (colon >= 0) {
            port = port(hostPort.substring(colon + 1), value);
        }
        int dot = host.indexOf('.');
        if (host.isEmpty() || dot == 0 || dot == host.length() - 1 || host.contains(":")) {
            throw new L2SpecException("s3: \"s3_endpoint\" must be \"<bucket>.<host>[:port]\", got '" + L2SpecException.clip(value) + "'");
        }
        String scheme = disableTls ? "http" : "https";
        String portPart = port < 0 ? "" : ":" + port;
        if (dot < 0) {
            // LMCache sends Host: <bucket> here (no expansion to an AWS host in any version): the same host, never a guessed one
            warnings.add("s3: \"s3_endpoint\" '" + L2SpecException.clip(value) + "' names a bucket but no host: requests go to the host '"
                    + host + "' itself, which rarely resolves; give \"<bucket>.s3.<region>.amazonaws.com\"");
            return new Endpoint(hostPort, host, URI.create(scheme + "://" + host + portPart), true);
        }
        String bucket = host.substring(0, dot);
        String server = host.substring(dot + 1);
        if (server.equals("localhost") || server.endsWith(".localhost")) {
            return new Endpoint(hostPort, bucket, URI.create(scheme + "://localhost" + portPart), true);
        }
        try {
            return new Endpoint(hostPort, bucket, new URI(scheme, null, server, port, null, null, null), false);
        } catch (URISyntaxException e) {
            throw new L2SpecException("s3: \"s3_endpoint\" host '" + L2SpecException.clip(server) + "' is not a host name");
        }
    }

    private static int port(String text, String value) throws L2SpecException {
        try {
            int port = Integer.parseInt(text);
            if (port >= 1 && port <= 65535) {
                return port;
            }
        } catch (NumberFormatException e) {
            // falls through to the one message
        }
        throw new L2SpecException("s3: \"s3_endpoint\" port must be an integer in 1..65535, got '" + L2SpecException.clip(value) + "'");
    }
}
