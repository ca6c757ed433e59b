package io.lmcache.server.tier;

import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.metrics.L2Metrics;
import io.lmcache.server.storage.ObjectStore;
import java.lang.foreign.MemorySegment;
import java.util.List;

/**
 * What every prefetch request works with: the adapters in index order, L1 (its store, the tier
 * steps on it, the pool's memory), the fold, and the policies.
 *
 * @param retain {@code --l2-prefetch-policy retain}: loaded objects are ordinary L1 objects, not freed with their last reader
 */
record PrefetchContext(List<L2Adapter> adapters, ObjectStore store, MemorySegment pool, int chunkSize, PrefixFold fold,
        boolean retain, L2Metrics metrics) {}
