package io.lmcache.server.module;

import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.loop.HandlerKind;
import io.lmcache.server.loop.OpTable;
import io.lmcache.server.metrics.LookupMetrics;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestDecoder;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoreLookups;
import io.lmcache.server.transfer.ChunkHashes;
import io.lmcache.server.transfer.ChunkRange;
import io.lmcache.server.transfer.LookupGeometry;
import io.lmcache.server.transfer.ObjectGroupCatalog;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Prefix lookups and their lifecycle. LOOKUP counts the leading chunks stored for every kv rank
 * (for hybrid models, in every object group under its window: {@link WindowedLookup}),
 * read-locks them for the request's readers, keeps the count under the request id and answers at
 * once; QUERY_PREFETCH_STATUS hands the count out once; FREE_LOOKUP_LOCKS and END_SESSION give back
 * the locks vLLM will not use. With an L2 tier, a LOOKUP that L1 does not fully hit is handed to the
 * {@link L2Prefetcher}, and QUERY_PREFETCH_STATUS answers None (still running) until it is done.
 */
public final class LookupModule {
    private static final Logger LOG = LoggerFactory.getLogger(LookupModule.class);
    /** A peer can send one bad key per message. */
    private static final RateLimitedLog BAD_LOOKUP = new RateLimitedLog(LOG, "LOOKUPs with an invalid key", 10);
    private static final Reply ZERO = new Reply.Int(0);
    /** WAIT_PREFETCH_STATUS holds one of the few CPU workers: never longer than this, whatever the client asks. */
    private static final long MAX_WAIT_NS = 5_000_000_000L;

    private final int chunkSize;
    private final ObjectStore store;
    private final LookupLeases leases;
    private final PrefetchResults results;
    private final ServerMetrics metrics;
    private final ObjectGroupCatalog catalog;
    private final L2Prefetcher prefetcher;

    /** L1 only. */
    public LookupModule(int chunkSize, ObjectStore store, LookupLeases leases, PrefetchResults results, ServerMetrics metrics,
            ObjectGroupCatalog catalog) {
        this(chunkSize, store, leases, results, metrics, catalog, null);
    }

    /**
     * {@code catalog} says which object groups (and windows) a model's hit needs; {@code prefetcher} null: L1 only. Models with
     * several object groups or windows are looked up in L1 only for now: L2 prefetch folds one group's leading run.
     */
    public LookupModule(int chunkSize, ObjectStore store, LookupLeases leases, PrefetchResults results, ServerMetrics metrics,
            ObjectGroupCatalog catalog, L2Prefetcher prefetcher) {
        this.chunkSize = chunkSize;
        this.catalog = catalog;
        this.store = store;
        this.leases = leases;
        this.results = results;
        this.metrics = metrics;
        this.prefetcher = prefetcher;
    }

    /**
     * This module's ops. The lookup family is QUICK (map lookups of a few µs); WAIT_PREFETCH_STATUS is
     * NORMAL, as LMCache runs it on its CPU pool.
     */
    public void declareOps(OpTable.Builder ops) {
        // runs on: lmcache-request-loop (QUICK, small) or lmcache-normal-* (QUICK, large; NORMAL)
        ops.op(Op.LOOKUP, HandlerKind.QUICK, 2, RequestDecoder::lookup, (r, peer) -> lookup(r), Reply.NONE);
        ops.op(Op.QUERY_PREFETCH_STATUS, HandlerKind.QUICK, 1, RequestDecoder::queryPrefetchStatus,
                (r, peer) -> query(r.requestId()), FailureReplies.ZERO);
        ops.op(Op.QUERY_PREFETCH_LOOKUP_HITS, HandlerKind.QUICK, 1, RequestDecoder::queryPrefetchLookupHits,
                (r, peer) -> peekHits(r.requestId()), FailureReplies.ZERO);
        ops.op(Op.WAIT_PREFETCH_STATUS, HandlerKind.NORMAL, 2, RequestDecoder::waitPrefetchStatus,
                (r, peer) -> waitQuery(r), FailureReplies.ZERO);
        ops.op(Op.FREE_LOOKUP_LOCKS, HandlerKind.QUICK, 2, RequestDecoder::freeLookupLocks, (r, peer) -> freeLookupLocks(r), Reply.NONE);
        ops.op(Op.END_SESSION, HandlerKind.QUICK, 2, RequestDecoder::endSession, (r, peer) -> endSession(r), Reply.NONE);
    }

    public Reply lookup(Request.Lookup request) {
        CacheKey key = request.key();
        String[] why = new String[1];
        ChunkRange range = ChunkRange.of(key, chunkSize, why);
        int hits = 0;
        LookupGeometry geometry = catalog.lookupGeometry(key.modelName(), key.worldSize());
        if (range == null || key.worldSize() < 1) {
            BAD_LOOKUP.warn("LOOKUP {}: {}; reporting 0 hits", LogText.clip(key.requestId()),
                    LogText.message(range == null ? why[0] : "world_size " + key.worldSize()));
            metrics.increment("lmcache_mp.bad_lookups", "lookups with an invalid key (answered with 0 hits)");
        } else if (range.endChunk() == 0) {
            // LMCache's early exit: no whole chunk to hash, so no probe (0 hits)
            metrics.lookups().earlyExit(key.modelName(), key.cacheSalt(), LookupMetrics.EarlyExit.EMPTY_CHUNK_HASHES);
        } else if (!geometry.plain()) {
            hits = lookupGroups(key, geometry, range.endChunk());
        } else {
            int endChunk = range.endChunk();
            long[] hashes = new long[2 * endChunk];
            List<ObjectStore.ReadLock> locks = new ArrayList<>();
            // hash only as far as the cache holds the prefix, in windows of 1, 2, 4, ... chunks: a new
            // 8 000-token prompt costs one chunk's hash, not 31, and a hit of n chunks takes the store lock
            // about log2(n) + 1 times instead of once
            int from = 0;
            int hashed = 0;
            for (int window = 1; from < endChunk; window *= 2) {
                int to = Math.min(endChunk, from + window);
                ChunkHashes.extend(key, chunkSize, from, to, hashes);
                hashed = to;
                int found = StoreLookups.lookupAndLock(store, key.modelName(), key.cacheSalt(), key.worldSize(), 0, hashes, from, to,
                        Math.max(0, key.numKvReaders()), locks);
                hits += found;
                if (found < to - from) {
                    break;
                }
                from = to;
            }
            if (hits < endChunk && prefetcher != null && handOver(key, hashes, hashed, endChunk, hits, locks)) {
                return Reply.NONE;
            }
            leases.put(key.requestId(), locks, key.worldSize(), Math.max(0, key.numKvReaders()));
            metrics.lookups().completed(key.modelName(), key.cacheSalt(), (long) endChunk * chunkSize, (long) hits * chunkSize, 0,
                    (long) hits * key.worldSize(), 0);
        }
        results.put(key.requestId(), hits);
        return Reply.NONE;
    }

    /** A model with several object groups or windows: every chunk hashed, then folded across the groups. */
    private int lookupGroups(CacheKey key, LookupGeometry geometry, int endChunk) {
        int readers = Math.max(0, key.numKvReaders());
        WindowedLookup.Locked locked = WindowedLookup.lookup(store, key, geometry, ChunkHashes.of(key, chunkSize, endChunk), endChunk,
                readers);
        leases.put(key.requestId(), locked.locks(), locked.chunks(), locked.ranks(), readers);
        // L1 only: the whole hit is L1's; its objects are the locks taken (one per object held for the hit)
        metrics.lookups().completed(key.modelName(), key.cacheSalt(), (long) endChunk * chunkSize, (long) locked.hits() * chunkSize, 0,
                locked.locks().size(), 0);
        return locked.hits();
    }

    /** The rest of the LOOKUP goes to L2: the result stays pending until the prefetcher completes it. */
    private boolean handOver(CacheKey key, long[] hashes, int hashed, int endChunk, int l1Hits, List<ObjectStore.ReadLock> locks) {
        long token = results.putPending(key.requestId(), l1Hits);
        // runs on: lmcache-l2 (the prefetch controller), once
        L2Prefetcher.Completion done = (hitChunks, allLocks, l2Keys) -> prefetched(key, token, endChunk, l1Hits, hitChunks, allLocks, l2Keys);
        return prefetcher.submit(new L2Prefetcher.Job(key, hashes, hashed, endChunk, l1Hits, locks, done));
    }

    private void prefetched(CacheKey key, long token, int endChunk, int l1Hits, int hitChunks, List<ObjectStore.ReadLock> locks, int l2Keys) {
        int readers = Math.max(0, key.numKvReaders());
        // counters before the result: a worker that has its answer finds the LOOKUP counted
        metrics.lookups().completed(key.modelName(), key.cacheSalt(), (long) endChunk * chunkSize, (long) l1Hits * chunkSize,
                (long) (hitChunks - l1Hits) * chunkSize, (long) hitChunks * key.worldSize() - l2Keys, l2Keys);
        if (!results.complete(key.requestId(), token, hitChunks, () -> leases.put(key.requestId(), locks, key.worldSize(), readers))) {
            // the request ended (or looked up again) meanwhile: nobody will retrieve these
            for (int i = locks.size() - 1; i >= 0; i--) {
                store.releaseRead(locks.get(i), readers);
            }
        }
    }

    /** The hit count of the request's LOOKUP, once; None while its L2 prefetch runs; 0 for an unknown (or already answered) request. */
    public Reply query(String requestId) {
        int hits = results.take(requestId);
        if (hits == PrefetchResults.PENDING) {
            return Reply.NONE;
        }
        return hits <= 0 ? ZERO : new Reply.Int(hits);
    }

    /** As {@link #query}, waiting (at most {@link #MAX_WAIT_NS}: it holds a CPU worker) for a prefetch that runs. */
    public Reply waitQuery(Request.WaitPrefetchStatus request) throws InterruptedException {
        long timeoutNs = (long) Math.min(MAX_WAIT_NS, Math.max(0, request.timeoutSeconds()) * 1e9);
        int hits = results.await(request.requestId(), timeoutNs);
        if (hits == PrefetchResults.PENDING) {
            return Reply.NONE;
        }
        return hits <= 0 ? ZERO : new Reply.Int(hits);
    }

    public Reply peekHits(String requestId) {
        int hits = results.peek(requestId);
        return hits <= 0 ? ZERO : new Reply.Int(hits);
    }

    public Reply freeLookupLocks(Request.FreeLookupLocks request) {
        CacheKey key = request.key();
        int from = Math.max(0, key.start()) / chunkSize;
        int to = (Math.max(key.end(), key.start()) + chunkSize - 1) / chunkSize;
        leases.free(key.requestId(), from, to);
        return Reply.NONE;
    }

    public Reply endSession(Request.EndSession request) {
        results.cancelPending(request.requestId());
        leases.end(request.requestId());
        return Reply.NONE;
    }

    /** Active lookups whose count has not been queried yet (LMCache's active_prefetch_jobs). */
    public int pendingResults() {
        return results.size();
    }
}
