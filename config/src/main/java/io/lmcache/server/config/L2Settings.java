package io.lmcache.server.config;

import io.lmcache.server.l2.L2AdapterSpec;
import java.util.List;

/**
 * The L2 tier's settings (hybrid-and-l2.md §B.9): the adapters in {@code --l2-adapter} order (the
 * adapter index and cascade order), as given and as parsed, and the controllers' policies.
 *
 * @param skipL1 {@code --l2-store-policy skip_l1}: an object written to every adapter leaves L1
 * @param retainPrefetched {@code --l2-prefetch-policy retain}: objects loaded from L2 stay in L1 after their last reader
 */
public record L2Settings(List<String> adapterJson, List<L2AdapterSpec> adapters, boolean skipL1, boolean retainPrefetched,
        int prefetchMaxInFlight) {
    public L2Settings {
        adapterJson = List.copyOf(adapterJson);
        adapters = List.copyOf(adapters);
    }

    public boolean enabled() {
        return !adapters.isEmpty();
    }
}
