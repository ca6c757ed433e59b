package io.lmcache.server.storage;

import io.lmcache.server.config.EvictionPolicyName;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/** Object stores for tests whose every pool region is ready at once (no preparation to wait for). */
public final class ReadyStores {
    private ReadyStores() {}

    /** A store over {@code poolBytes} in regions of {@code regionBytes}, all ready. */
    public static ObjectStore of(long poolBytes, long regionBytes, EvictionPolicyName policy, long writeTtlNs, long readTtlNs, LongSupplier clockNs,
            StoreCounters counters) {
        SlabAllocator allocator = new SlabAllocator(poolBytes, regionBytes);
        ObjectStore store = new ObjectStore(allocator, poolBytes, policy, writeTtlNs, readTtlNs, clockNs, counters);
        for (int r = 0; r < allocator.regionCount(); r++) {
            store.addReadyRegion(r);
        }
        return store;
    }

    /** LRU, lock TTLs far beyond any test (600 s write, 300 s read), the system clock, fresh counters. */
    public static ObjectStore lru(long poolBytes, long regionBytes) {
        return of(poolBytes, regionBytes, EvictionPolicyName.LRU, TimeUnit.SECONDS.toNanos(600), TimeUnit.SECONDS.toNanos(300), System::nanoTime,
                new StoreCounters());
    }
}
