package io.lmcache.server.module;

import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.loop.HandlerKind;
import io.lmcache.server.loop.OpTable;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestDecoder;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.transfer.ChunkHashes;
import io.lmcache.server.transfer.ChunkRange;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Prefix lookups and their lifecycle. LOOKUP counts the leading chunks stored for every kv rank,
 * read-locks them for the request's readers, keeps the count under the request id and answers at
 * once; QUERY_PREFETCH_STATUS hands the count out once; FREE_LOOKUP_LOCKS and END_SESSION give back
 * the locks vLLM will not use.
 */
public final class LookupModule {
    private static final Logger LOG = LoggerFactory.getLogger(LookupModule.class);
    /** A peer can send one bad key per message. */
    private static final RateLimitedLog BAD_LOOKUP = new RateLimitedLog(LOG, "LOOKUPs with an invalid key", 10);
    private static final Reply ZERO = new Reply.Int(0);

    private final int chunkSize;
    private final ObjectStore store;
    private final LookupLeases leases;
    private final PrefetchResults results;
    private final ServerMetrics metrics;

    public LookupModule(int chunkSize, ObjectStore store, LookupLeases leases, PrefetchResults results, ServerMetrics metrics) {
        this.chunkSize = chunkSize;
        this.store = store;
        this.leases = leases;
        this.results = results;
        this.metrics = metrics;
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
                (r, peer) -> query(r.requestId()), FailureReplies.ZERO);
        ops.op(Op.FREE_LOOKUP_LOCKS, HandlerKind.QUICK, 2, RequestDecoder::freeLookupLocks, (r, peer) -> freeLookupLocks(r), Reply.NONE);
        ops.op(Op.END_SESSION, HandlerKind.QUICK, 2, RequestDecoder::endSession, (r, peer) -> endSession(r), Reply.NONE);
    }

    public Reply lookup(Request.Lookup request) {
        CacheKey key = request.key();
        String[] why = new String[1];
        ChunkRange range = ChunkRange.of(key, chunkSize, why);
        int hits = 0;
        if (range == null || key.worldSize() < 1) {
            BAD_LOOKUP.warn("LOOKUP {}: {}; reporting 0 hits", LogText.clip(key.requestId()),
                    LogText.message(range == null ? why[0] : "world_size " + key.worldSize()));
            metrics.increment("lmcache_mp.bad_lookups", "lookups with an invalid key (answered with 0 hits)");
        } else if (range.endChunk() > 0) {
            int endChunk = range.endChunk();
            long[] hashes = new long[2 * endChunk];
            List<ObjectStore.ReadLock> locks = new ArrayList<>();
            // hash only as far as the cache holds the prefix, in windows of 1, 2, 4, ... chunks: a new
            // 8 000-token prompt costs one chunk's hash, not 31, and a hit of n chunks takes the store lock
            // about log2(n) + 1 times instead of once
            int from = 0;
            for (int window = 1; from < endChunk; window *= 2) {
                int to = Math.min(endChunk, from + window);
                ChunkHashes.extend(key, chunkSize, from, to, hashes);
                int found = store.lookupAndLock(key.modelName(), key.cacheSalt(), key.worldSize(), 0, hashes, from, to,
                        Math.max(0, key.numKvReaders()), locks);
                hits += found;
                if (found < to - from) {
                    break;
                }
                from = to;
            }
            leases.put(key.requestId(), locks, key.worldSize(), Math.max(0, key.numKvReaders()));
            metrics.lookup(key.modelName(), key.cacheSalt(), (long) range.endChunk() * chunkSize, (long) hits * chunkSize);
        }
        results.put(key.requestId(), hits);
        return Reply.NONE;
    }

    /** The hit count of the request's LOOKUP, once; 0 for an unknown (or already answered) request. */
    public Reply query(String requestId) {
        int hits = results.take(requestId);
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
        leases.end(request.requestId());
        return Reply.NONE;
    }

    /** Active lookups whose count has not been queried yet (LMCache's active_prefetch_jobs). */
    public int pendingResults() {
        return results.size();
    }
}
