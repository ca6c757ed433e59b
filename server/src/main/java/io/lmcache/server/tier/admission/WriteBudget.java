package io.lmcache.server.tier.admission;

import java.util.HashMap;
import java.util.Map;

/**
 * Each tenant's (cache salt's) L2 write budget: a token bucket of {@code bytesPerSecond}, holding at most one second's worth,
 * so a tenant that stores in bursts can write a burst and one that stores without pause writes at its rate. An object larger than
 * a full bucket passes when the bucket is full (else it could never be written) and leaves it empty. At most
 * {@link #MAX_TENANTS} buckets are kept; the tenants past them share one (bounded memory whatever the salts). Not thread-safe
 * (its one owner synchronizes).
 */
final class WriteBudget {
    static final int MAX_TENANTS = 4096;
    private static final String OTHERS = "\u0000others";

    private final long bytesPerSecond;
    private final Map<String, Bucket> buckets = new HashMap<>();

    private static final class Bucket {
        double tokens;
        long lastNs;

        Bucket(double tokens, long lastNs) {
            this.tokens = tokens;
            this.lastNs = lastNs;
        }
    }

    /** {@code bytesPerSecond} > 0. */
    WriteBudget(long bytesPerSecond) {
        if (bytesPerSecond <= 0) {
            throw new IllegalArgumentException("bytesPerSecond " + bytesPerSecond);
        }
        this.bytesPerSecond = bytesPerSecond;
    }

    /** Takes {@code bytes} from {@code salt}'s bucket at {@code nowNs}; false (nothing taken) when it has too few. */
    boolean take(String salt, long bytes, long nowNs) {
        Bucket bucket = buckets.get(salt);
        if (bucket == null) {
            String name = buckets.size() < MAX_TENANTS ? salt : OTHERS;
            bucket = buckets.computeIfAbsent(name, n -> new Bucket(bytesPerSecond, nowNs));
        }
        long elapsedNs = Math.max(0, nowNs - bucket.lastNs);
        bucket.tokens = Math.min(bytesPerSecond, bucket.tokens + elapsedNs * (bytesPerSecond / 1e9));
        bucket.lastNs = nowNs;
        boolean full = bucket.tokens >= bytesPerSecond;
        if (bucket.tokens < bytes && !full) {
            return false;
        }
        bucket.tokens = Math.max(0, bucket.tokens - bytes);
        return true;
    }

    int tenants() {
        return buckets.size();
    }
}
