package io.lmcache.server.l2;

import java.util.Map;

/** What an adapter holds (bytes it stored or loaded in this process) against its capacity (0 = unknown). */
public record AdapterUsage(long totalBytesUsed, long totalCapacityBytes, Map<String, Long> bytesByCacheSalt) {
    public AdapterUsage {
        bytesByCacheSalt = Map.copyOf(bytesByCacheSalt);
    }

    /** Used over capacity; -1.0 when the capacity is unknown, as LMCache reports it. */
    public double usageFraction() {
        return totalCapacityBytes <= 0 ? -1.0 : (double) totalBytesUsed / totalCapacityBytes;
    }
}
