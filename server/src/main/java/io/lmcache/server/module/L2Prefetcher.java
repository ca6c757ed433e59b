package io.lmcache.server.module;

import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.storage.ObjectStore;
import java.util.List;

/**
 * Takes over the rest of a LOOKUP that L1 did not fully hit (the L2 prefetch controller): it
 * looks the remaining chunks up in L2, loads what extends the prefix, and completes the job. The
 * LOOKUP is answered at once; QUERY_PREFETCH_STATUS answers "running" until the job completes.
 */
@FunctionalInterface
public interface L2Prefetcher {
    /**
     * One LOOKUP's hand-over: its key, the chunk hashes computed so far ({@code hashes} has room for {@code endChunk}), the
     * leading {@code l1Hits} chunks found in L1 and their read locks (chunk-major, then rank), now owned by the job.
     */
    record Job(CacheKey key, byte[] hashes, int hashedChunks, int endChunk, int l1Hits, List<ObjectStore.ReadLock> l1Locks,
            Completion completion) {}

    /** How a job ends: exactly once, on the prefetcher's thread. */
    @FunctionalInterface
    interface Completion {
        /**
         * @param hitChunks the leading chunks now in L1 for every key (at least {@code l1Hits})
         * @param locks the read locks of those chunks (the job's L1 locks first), chunk-major then rank
         * @param l2Keys how many of the hit keys were loaded from L2
         */
        void done(int hitChunks, List<ObjectStore.ReadLock> locks, int l2Keys);
    }

    /** True when the job is taken; false (nothing changed hands) when it cannot be: the caller answers with the L1 hits. */
    boolean submit(Job job);

    /**
     * Marks chunks {@code [0, toChunk)} of the key (hashes in {@code hashes}) recently used in L2's eviction order, loading and
     * locking nothing (the prefix the engine's own cache covers); returns the L2 keys touched. Default: nothing to touch.
     */
    default int touch(CacheKey key, byte[] hashes, int toChunk) {
        return 0;
    }
}
