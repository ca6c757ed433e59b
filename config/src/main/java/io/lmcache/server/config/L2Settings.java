package io.lmcache.server.config;

import io.lmcache.server.l2.L2AdapterSpec;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The L2 tier's settings (hybrid-and-l2.md §B.9): the adapters in {@code --l2-adapter} order (the
 * adapter index and cascade order), as given and as parsed, and the controllers' policies.
 *
 * @param skipL1 {@code --l2-store-policy skip_l1}: an object written to every adapter leaves L1
 * @param retainPrefetched {@code --l2-prefetch-policy retain}: objects loaded from L2 stay in L1 after their last reader
 * @param prefetchLoadTimeoutNs {@code --l2-prefetch-load-timeout}: how long a LOOKUP waits for L2 before it is answered with what is
 *     usable (its L1 hits)
 * @param fullAttentionOnly {@code --l2-store-policy full_attention_only} (LMCache's {@code full_attention_only_store_policy.py}):
 *     sliding-window object groups are not written through; only a window commit ({@code --commit-policy}) writes them
 * @param admission {@code --l2-admission} and {@code --l2-write-budget-bytes-per-second}: which committed objects the write-through
 *     sends at all
 */
public record L2Settings(List<String> adapterJson, List<L2AdapterSpec> adapters, boolean skipL1, boolean retainPrefetched,
        int prefetchMaxInFlight, boolean fullAttentionOnly, long prefetchLoadTimeoutNs, L2AdmissionSettings admission) {
    /**
     * Without {@code --l2-prefetch-load-timeout}: LMCache then waits for L2 without a bound; this server answers a LOOKUP's
     * prefetch status after this long at the latest, so that a stuck adapter never holds a request (and its L1 locks).
     */
    public static final long DEFAULT_PREFETCH_LOAD_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(10);

    public L2Settings {
        adapterJson = List.copyOf(adapterJson);
        adapters = List.copyOf(adapters);
    }

    /** The {@code --l2-store-policy} value. */
    public String storePolicy() {
        return skipL1 ? "skip_l1" : fullAttentionOnly ? "full_attention_only" : "default";
    }

    public boolean enabled() {
        return !adapters.isEmpty();
    }
}
