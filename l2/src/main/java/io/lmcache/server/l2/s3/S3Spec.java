package io.lmcache.server.l2.s3;

import io.lmcache.server.l2.L2AdapterSpec;
import java.net.URI;
import java.util.List;

/**
 * One {@code {"type":"s3", ...}} object (docs/l2-s3.md; LMCache's {@code S3L2AdapterConfig}): objects under LMCache's names at the
 * root of one bucket, the bucket being the first label of {@code s3_endpoint}'s host.
 *
 * @param endpoint {@code s3_endpoint} without {@code s3://}: {@code <bucket>.<host>[:port]}, as LMCache sends it in {@code Host}
 * @param bucket its first label
 * @param connectUri where requests go (scheme, host, port; the SDK puts the bucket in front of the host unless {@code pathStyle})
 * @param pathStyle the bucket in the path instead of the host: a {@code *.localhost} endpoint (connected to {@code localhost}, which
 *     Java resolves, where {@code bucket.localhost} does not) or an endpoint with no host after the bucket
 * @param accessKeyId "" with {@code secretAccessKey} "": the SDK's default credential chain
 * @param numIoThreads values (PUT or GET) in flight at once; the connections are twice that, so lookups are not queued behind them
 * @param breakerInitialCooldownNs the first wait of an open breaker, doubling per failed probe up to {@code breakerMaxCooldownNs}
 */
public record S3Spec(String endpoint, String bucket, URI connectUri, boolean pathStyle, String region, boolean disableTls,
        String accessKeyId, String secretAccessKey, int numIoThreads, long maxCapacityBytes, long breakerInitialCooldownNs,
        long breakerMaxCooldownNs, boolean persistEnabled, EvictionSpec eviction, List<String> warnings) implements L2AdapterSpec {
    public S3Spec {
        warnings = List.copyOf(warnings);
    }

    @Override
    public String type() {
        return "s3";
    }

    /** Static credentials given (else the default chain). */
    public boolean staticCredentials() {
        return !accessKeyId.isEmpty();
    }

    /** The secret never reaches a log line through a spec. */
    @Override
    public String toString() {
        return "S3[endpoint=" + endpoint + ", bucket=" + bucket + ", connect=" + connectUri + (pathStyle ? " (path-style)" : "")
                + ", region=" + region + ", credentials=" + (staticCredentials() ? "static " + accessKeyId + "/<set>" : "default chain")
                + ", numIoThreads=" + numIoThreads + ", maxCapacityBytes=" + maxCapacityBytes + "]";
    }
}
