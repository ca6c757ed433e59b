package io.lmcache.server.module;

import io.lmcache.server.metrics.LookupCatalogue;
import io.lmcache.server.metrics.LookupMetrics;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.RequestConfigs;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.PendingFills;
import io.lmcache.server.storage.PrefixKeys;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;

/**
 * A LOOKUP's load controls, from its key's {@code request_configs} ({@link RequestConfigs}; LMCache's
 * {@code kv_load_policy.py}, stored id 71012400894, and its LookupModule test, stored id 71364661565):
 * <ul>
 *   <li>{@code lmcache.skip_load} true: LMCache's default load policy declines, so the LOOKUP answers 0 hit chunks without
 *       touching L1 or L2 (no L2 fetch, no L1 read locks; early exit {@code load_policy_recompute}, its tokens still requested);</li>
 *   <li>{@code lmcache.hint.engine_computed_tokens}: the prefix the engine's own cache holds. LMCache hands it to the policy
 *       only; this server also acts on it: the covered whole chunks count as hit (vLLM loads only past its computed tokens), are
 *       marked recently used in L1 and L2 (so eviction keeps the prefix the next request on another engine will need) but neither
 *       locked nor loaded, and only the rest is looked up, locked and prefetched.</li>
 * </ul>
 * Plain (single full-attention group) lookups only: a hybrid model's windows are looked up as before.
 */
final class LoadControls {
    private final int chunkSize;
    private final ObjectStore store;
    private final ServerMetrics metrics;
    private final LongAdder touchedL1;
    private final LongAdder touchedL2;

    LoadControls(int chunkSize, ObjectStore store, ServerMetrics metrics) {
        this.chunkSize = chunkSize;
        this.store = store;
        this.metrics = metrics;
        // no metrics: an op table built only to be inspected (ServerOpsTest)
        this.touchedL1 = metrics == null ? new LongAdder() : metrics.counter(LookupCatalogue.COVERED_TOUCHED_OBJECTS, "l1");
        this.touchedL2 = metrics == null ? new LongAdder() : metrics.counter(LookupCatalogue.COVERED_TOUCHED_OBJECTS, "l2");
    }

    /** {@code lmcache.skip_load}: the LOOKUP is answered 0. */
    static boolean declines(CacheKey key) {
        return key.requestConfigs().skipLoad();
    }

    /** A declined LOOKUP's counters: its whole chunks were requested and none served (LMCache counts them the same). */
    void declined(CacheKey key, int endChunk) {
        metrics.lookups().earlyExit(key.modelName(), key.cacheSalt(), LookupMetrics.EarlyExit.LOAD_POLICY_RECOMPUTE, (long) endChunk * chunkSize);
    }

    /** The whole chunks of the prompt the engine holds, at most the lookup's. */
    int coveredChunks(CacheKey key, int endChunk) {
        int tokens = key.requestConfigs().engineComputedTokens();
        return tokens <= 0 ? 0 : Math.min(endChunk, tokens / chunkSize);
    }

    /**
     * Marks chunks {@code [0, covered)} (hashes in {@code hashes}) recently used in L1 (a read lock taken and given back at once:
     * the policy sees a use, nothing stays locked, a write in flight is not waited for) and, through {@code prefetcher}, in L2.
     */
    void touchCovered(CacheKey key, byte[] hashes, int covered, L2Prefetcher prefetcher) {
        List<ObjectStore.ReadLock> locks = new ArrayList<>();
        PendingFills notWaited = new PendingFills();
        PrefixKeys prefix = new PrefixKeys(key.modelName(), key.cacheSalt(), key.tags(), key.worldSize(), 0, hashes);
        store.lookupAndLock(prefix, 0, covered, 1, locks, notWaited);
        notWaited.arm(() -> { });
        for (int i = locks.size() - 1; i >= 0; i--) {
            store.releaseRead(locks.get(i), 1);
        }
        touchedL1.add(locks.size());
        if (prefetcher != null) {
            touchedL2.add(prefetcher.touch(key, hashes, covered));
        }
    }

    /** Lock {@code i} of a plain lookup that started at chunk {@code first}: its chunk (chunk-major, then rank). */
    static int[] chunks(int locks, int worldSize, int first) {
        int[] chunks = new int[locks];
        for (int i = 0; i < locks; i++) {
            chunks[i] = first + i / worldSize;
        }
        return chunks;
    }

    /** Lock {@code i}'s kv rank. */
    static int[] ranks(int locks, int worldSize) {
        int[] ranks = new int[locks];
        for (int i = 0; i < locks; i++) {
            ranks[i] = i % worldSize;
        }
        return ranks;
    }
}
