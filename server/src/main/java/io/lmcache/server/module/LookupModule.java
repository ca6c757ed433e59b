package io.lmcache.server.module;

import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.loop.HandlerKind;
import io.lmcache.server.loop.OpTable;
import io.lmcache.server.metrics.LookupCatalogue;
import io.lmcache.server.metrics.LookupMetrics;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestDecoder;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.PendingFills;
import io.lmcache.server.storage.PrefixKeys;
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
    /** {@link #handOver}: the L2 prefetcher took the rest of the LOOKUP (or nothing is left to answer). */
    private static final long HANDED_OVER = -1;
    /** WAIT_PREFETCH_STATUS holds one of the few CPU workers: never longer than this, whatever the client asks. */
    private static final long MAX_WAIT_NS = 5_000_000_000L;

    private final int chunkSize;
    private final ObjectStore store;
    private final LookupLeases leases;
    private final PrefetchResults results;
    private final ServerMetrics metrics;
    private final ObjectGroupCatalog catalog;
    private final L2Prefetcher prefetcher;
    private final LoadControls loadControls;
    /** {@code --commit-policy}: END_SESSION's window commit, fed each LOOKUP's prompt end; null when off. */
    private final WindowCommit windowCommit;
    private final Observer observer;

    /**
     * Hears every LOOKUP with a valid key and at least one whole chunk, before it is looked up (the lookup-hash log,
     * {@code --lookup-hash-log-dir}): on the request path, so an implementation only enqueues, never waits.
     */
    @FunctionalInterface
    public interface Observer {
        Observer NONE = (key, endChunk) -> { };

        /** {@code key}'s LOOKUP covers chunks {@code 0..endChunk-1}. */
        void looked(CacheKey key, int endChunk);
    }

    /**
     * Where a LOOKUP goes past L1: the L2 prefetcher (null: L1 only), the window commit (null: off) and who else hears it
     * ({@link Observer#NONE}: nobody).
     */
    public record BeyondL1(L2Prefetcher prefetcher, WindowCommit windowCommit, Observer observer) {
        public BeyondL1(L2Prefetcher prefetcher, WindowCommit windowCommit) {
            this(prefetcher, windowCommit, Observer.NONE);
        }
    }

    /** L1 only. */
    public LookupModule(int chunkSize, ObjectStore store, LookupLeases leases, PrefetchResults results, ServerMetrics metrics,
            ObjectGroupCatalog catalog) {
        this(chunkSize, store, leases, results, metrics, catalog, new BeyondL1(null, null));
    }

    /** Without a window commit. */
    public LookupModule(int chunkSize, ObjectStore store, LookupLeases leases, PrefetchResults results, ServerMetrics metrics,
            ObjectGroupCatalog catalog, L2Prefetcher prefetcher) {
        this(chunkSize, store, leases, results, metrics, catalog, new BeyondL1(prefetcher, null));
    }

    /**
     * {@code catalog} says which object groups (and windows) a model's hit needs; {@code beyond}'s prefetcher null: L1 only. Models
     * with several object groups or windows are looked up in L1 only for now: L2 prefetch folds one group's leading run.
     */
    public LookupModule(int chunkSize, ObjectStore store, LookupLeases leases, PrefetchResults results, ServerMetrics metrics,
            ObjectGroupCatalog catalog, BeyondL1 beyond) {
        this.chunkSize = chunkSize;
        this.catalog = catalog;
        this.store = store;
        this.leases = leases;
        this.results = results;
        this.metrics = metrics;
        this.prefetcher = beyond.prefetcher();
        this.windowCommit = beyond.windowCommit();
        this.observer = beyond.observer() == null ? Observer.NONE : beyond.observer();
        this.loadControls = new LoadControls(chunkSize, store, metrics);
    }

    /**
     * This module's ops. The lookup family is QUICK (map lookups of a few µs); WAIT_PREFETCH_STATUS is
     * NORMAL, as LMCache runs it on its CPU pool.
     */
    public void declareOps(OpTable.Builder ops) {
        // runs on: lmcache-request-loop (QUICK, small) or lmcache-normal-* (QUICK, large; NORMAL)
        ops.op(Op.LOOKUP, HandlerKind.QUICK, RequestDecoder::lookup, this::lookup, Reply.NONE);
        ops.op(Op.QUERY_PREFETCH_STATUS, HandlerKind.QUICK, RequestDecoder::queryPrefetchStatus,
                (r, peer) -> query(resultKey(peer, r.requestId())), FailureReplies.ZERO);
        ops.op(Op.QUERY_PREFETCH_LOOKUP_HITS, HandlerKind.QUICK, RequestDecoder::queryPrefetchLookupHits,
                (r, peer) -> peekHits(resultKey(peer, r.requestId())), FailureReplies.ZERO);
        ops.op(Op.WAIT_PREFETCH_STATUS, HandlerKind.NORMAL, RequestDecoder::waitPrefetchStatus, this::waitQuery, FailureReplies.ZERO);
        ops.op(Op.FREE_LOOKUP_LOCKS, HandlerKind.QUICK, RequestDecoder::freeLookupLocks, (r, peer) -> freeLookupLocks(r), Reply.NONE);
        ops.op(Op.END_SESSION, HandlerKind.QUICK, RequestDecoder::endSession, this::endSession, Reply.NONE);
    }

    /**
     * Where a LOOKUP's count waits for its QUERY: under the connection and the request id. SGLang's connector sends LOOKUP and
     * QUERY from every TP rank with the same request id, each on its own connection ({@code sglang/multi_process_adapter.py@6f45e604},
     * {@code lookup_kv}); keyed by the id alone, one rank would take another's count and the ranks' MIN would make the hit 0.
     * vLLM's scheduler sends both on its one connection. A null peer (a caller without a connection) keys by the id alone.
     * The read locks stay keyed by the request id ({@link LookupLeases}): vLLM's RETRIEVEs come from other connections.
     */
    static String resultKey(PeerId peer, String requestId) {
        return peer == null ? requestId : peer + "/" + requestId;
    }

    public Reply lookup(Request.Lookup request) {
        return lookup(request, null);
    }

    public Reply lookup(Request.Lookup request, PeerId peer) {
        CacheKey key = request.key();
        String resultKey = resultKey(peer, key.requestId());
        if (windowCommit != null) {
            windowCommit.looked(key);
        }
        String[] why = new String[1];
        ChunkRange range = ChunkRange.of(key, chunkSize, why);
        if (range == null || key.worldSize() < 1) {
            BAD_LOOKUP.warn("LOOKUP {}: {}; reporting 0 hits", LogText.clip(key.requestId()),
                    LogText.message(range == null ? why[0] : "world_size " + key.worldSize()));
            metrics.increment(LookupCatalogue.BAD_LOOKUPS);
            results.put(resultKey, 0);
        } else if (range.endChunk() == 0) {
            // LMCache's early exit: no whole chunk to hash, so no probe (0 hits)
            metrics.lookups().earlyExit(key.modelName(), key.cacheSalt(), LookupMetrics.EarlyExit.EMPTY_CHUNK_HASHES);
            results.put(resultKey, 0);
        } else {
            observer.looked(key, range.endChunk());
            probe(key, resultKey, range.endChunk());
        }
        return Reply.NONE;
    }

    /** A LOOKUP of whole chunks: declined by the request's load controls, or looked up. */
    private void probe(CacheKey key, String resultKey, int endChunk) {
        if (LoadControls.declines(key)) {
            loadControls.declined(key, endChunk); // lmcache.skip_load: no L2 fetch, no L1 lock, 0 hits
            results.put(resultKey, 0);
        } else {
            LookupGeometry geometry = catalog.lookupGeometry(key.modelName(), key.worldSize());
            resolve(geometry.plain() ? new Pass(key, resultKey, endChunk, new byte[ChunkHash.BYTES * endChunk], null,
                    loadControls.coveredChunks(key, endChunk)) : new Pass(key, resultKey, endChunk, ChunkHashes.of(key, chunkSize, endChunk),
                    geometry, 0), 0);
        }
    }

    /**
     * One LOOKUP's state across its passes: its key, chunk count, the hashes computed so far ({@code hashed} of them) and,
     * for a model with several object groups or windows, its geometry (all hashes are computed up front then).
     */
    private static final class Pass {
        final CacheKey key;
        /** {@link #resultKey}: where QUERY finds the count. */
        final String resultKey;
        final int endChunk;
        final byte[] hashes;
        final LookupGeometry groups;
        /** The leading chunks the engine's own cache holds ({@link LoadControls}): counted as hit, touched, never locked. */
        final int covered;
        int hashed;
        boolean touched;

        Pass(CacheKey key, String resultKey, int endChunk, byte[] hashes, LookupGeometry groups, int covered) {
            this.key = key;
            this.resultKey = resultKey;
            this.endChunk = endChunk;
            this.hashes = hashes;
            this.groups = groups;
            this.covered = covered;
            this.hashed = groups == null ? 0 : endChunk;
        }

        int readers() {
            return key.readLocks();
        }
    }

    /** What one pass found: the hit and its read locks (with the chunk and rank of each lock for a windowed hit). */
    private record Found(int hits, List<ObjectStore.ReadLock> locks, int[] chunks, int[] ranks) {}

    /**
     * Looks the prefix up; when it meets chunks whose STORE was answered but whose copy has not ended, it gives its locks
     * back, leaves the result pending ({@code QUERY_PREFETCH_STATUS} answers None) and runs again when those writes end, so
     * a request that follows a STORE's reply sees that STORE's chunks, and a write that fails shrinks the hit to the prefix
     * before it. {@code token}: the pending result this pass completes (0: none left pending yet).
     */
    private void resolve(Pass pass, long token) {
        long pendingToken = token;
        while (true) {
            PendingFills fills = new PendingFills();
            Found found = pass.groups == null ? findPlain(pass, fills) : findGroups(pass, fills);
            if (!fills.any()) {
                finish(pass, found, pendingToken);
                return;
            }
            release(found.locks(), pass.readers());
            store.counters().lookupsAfterWrites.increment();
            if (pendingToken == 0) {
                pendingToken = results.putPending(pass.resultKey, found.hits());
            }
            long armed = pendingToken;
            // runs on: the thread that ends the last of these writes (lmcache-cuda-events, a transfer thread, housekeeping)
            if (fills.arm(() -> resolve(pass, armed))) {
                return;
            }
        }
    }

    private Found findPlain(Pass pass, PendingFills fills) {
        CacheKey key = pass.key;
        List<ObjectStore.ReadLock> locks = new ArrayList<>();
        // hash only as far as the cache holds the prefix, in windows of 1, 2, 4, ... chunks: a new
        // 8 000-token prompt costs one chunk's hash, not 31, and a hit of n chunks takes the store lock
        // about log2(n) + 1 times instead of once
        touchCovered(pass);
        int hits = pass.covered;
        int from = pass.covered;
        for (int window = 1; from < pass.endChunk; window *= 2) {
            int to = Math.min(pass.endChunk, from + window);
            if (to > pass.hashed) {
                ChunkHashes.extend(key, chunkSize, pass.hashed, to, pass.hashes);
                pass.hashed = to;
            }
            int found = store.lookupAndLock(new PrefixKeys(key.modelName(), key.cacheSalt(), key.tags(), key.worldSize(), 0, pass.hashes), from, to,
                    pass.readers(), locks, fills);
            hits += found;
            if (found < to - from) {
                break;
            }
            from = to;
        }
        ChunkHashes.remember(key, chunkSize, pass.hashed, pass.hashes); // the RETRIEVE, the STORE and the next poll of this prompt
        return new Found(hits, locks, null, null);
    }

    /** Once per LOOKUP: the covered prefix hashed and marked recently used in L1 and L2. */
    private void touchCovered(Pass pass) {
        if (pass.covered == 0 || pass.touched) {
            return;
        }
        if (pass.covered > pass.hashed) {
            ChunkHashes.extend(pass.key, chunkSize, pass.hashed, pass.covered, pass.hashes);
            pass.hashed = pass.covered;
        }
        loadControls.touchCovered(pass.key, pass.hashes, pass.covered, prefetcher);
        pass.touched = true;
    }

    /** A plain LOOKUP's lease: its locks start at the first chunk past the covered prefix. */
    private void putLease(Pass pass, List<ObjectStore.ReadLock> locks) {
        int worldSize = pass.key.worldSize();
        leases.put(pass.key.requestId(), locks, LoadControls.chunks(locks.size(), worldSize, pass.covered),
                LoadControls.ranks(locks.size(), worldSize), pass.readers());
    }

    private Found findGroups(Pass pass, PendingFills fills) {
        WindowedLookup.Locked locked = WindowedLookup.lookup(store, pass.key, pass.groups, pass.hashes, pass.endChunk, pass.readers(), fills);
        return new Found(locked.hits(), locked.locks(), locked.chunks(), locked.ranks());
    }

    /** Publishes a pass that met no write in flight: hands the rest to L2, or records the lease and the count. */
    private void finish(Pass pass, Found found, long token) {
        CacheKey key = pass.key;
        int readers = pass.readers();
        long pending = token;
        // a tagged key stays in L1: LMCache's L2 adapters other than its pure-Python fs cannot name tags and it refuses
        // their tagged lookups (docs/source/mp/request_tags.rst); our L2 names carry no tags either
        if (pass.groups == null && found.hits() < pass.endChunk && prefetcher != null && key.tags().isEmpty()) {
            pending = handOver(pass, found.hits(), found.locks(), token);
            if (pending == HANDED_OVER) {
                return;
            }
        }
        // counters before the result: a worker that has its answer finds the LOOKUP counted
        // with several object groups, L1 only: the hit's objects are the locks taken (one per object held for the hit)
        metrics.lookups().completed(key.modelName(), key.cacheSalt(), (long) pass.endChunk * chunkSize, (long) found.hits() * chunkSize, 0,
                pass.groups == null ? (long) (found.hits() - pass.covered) * key.worldSize() : found.locks().size(), 0);
        Runnable lease = pass.groups == null ? () -> putLease(pass, found.locks())
                : () -> leases.put(key.requestId(), found.locks(), found.chunks(), found.ranks(), readers);
        if (pending == 0) {
            lease.run();
            results.put(pass.resultKey, found.hits());
        } else if (!results.complete(pass.resultKey, pending, found.hits(), lease)) {
            release(found.locks(), readers); // the request ended (or looked up again) while its writes ran
        }
    }

    private void release(List<ObjectStore.ReadLock> locks, int readers) {
        for (int i = locks.size() - 1; i >= 0; i--) {
            store.releaseRead(locks.get(i), readers);
        }
    }

    /**
     * The rest of the LOOKUP goes to L2: the result stays pending until the prefetcher completes it. Returns
     * {@link #HANDED_OVER} when nothing is left to answer here (taken, or the request ended or looked up again while its
     * writes ran), else the pending token to answer the L1 hits with (the prefetcher could not take the job).
     */
    private long handOver(Pass pass, int l1Hits, List<ObjectStore.ReadLock> locks, long pendingToken) {
        CacheKey key = pass.key;
        long token = pendingToken == 0 ? results.putPending(pass.resultKey, l1Hits) : results.renewPending(pass.resultKey, pendingToken);
        if (token == 0) {
            release(locks, key.readLocks());
            return HANDED_OVER;
        }
        // runs on: lmcache-l2 (the prefetch controller), once
        L2Prefetcher.Completion done = (hitChunks, allLocks, l2Keys) -> prefetched(pass, token, l1Hits, hitChunks, allLocks, l2Keys);
        return prefetcher.submit(new L2Prefetcher.Job(key, pass.hashes, pass.hashed, pass.endChunk, l1Hits, locks, done)) ? HANDED_OVER : token;
    }

    private void prefetched(Pass pass, long token, int l1Hits, int hitChunks, List<ObjectStore.ReadLock> locks, int l2Keys) {
        CacheKey key = pass.key;
        int endChunk = pass.endChunk;
        int readers = pass.readers();
        // counters before the result: a worker that has its answer finds the LOOKUP counted
        metrics.lookups().completed(key.modelName(), key.cacheSalt(), (long) endChunk * chunkSize, (long) l1Hits * chunkSize,
                (long) (hitChunks - l1Hits) * chunkSize, (long) (hitChunks - pass.covered) * key.worldSize() - l2Keys, l2Keys);
        if (!results.complete(pass.resultKey, token, hitChunks, () -> putLease(pass, locks))) {
            release(locks, readers); // the request ended (or looked up again) meanwhile: nobody will retrieve these
        }
    }

    /**
     * The hit count of the request's LOOKUP, once; None while its L2 prefetch runs; 0 for an unknown (or already answered)
     * request. {@code resultKey}: {@link #resultKey} of the asking connection and the request id.
     */
    public Reply query(String resultKey) {
        int hits = results.take(resultKey);
        if (hits == PrefetchResults.PENDING) {
            return Reply.NONE;
        }
        return hits <= 0 ? ZERO : new Reply.Int(hits);
    }

    /** As {@link #query}, waiting (at most {@link #MAX_WAIT_NS}: it holds a CPU worker) for a prefetch that runs. */
    public Reply waitQuery(Request.WaitPrefetchStatus request, PeerId peer) throws InterruptedException {
        long timeoutNs = (long) Math.min(MAX_WAIT_NS, Math.max(0, request.timeoutSeconds()) * 1e9);
        int hits = results.await(resultKey(peer, request.requestId()), timeoutNs);
        if (hits == PrefetchResults.PENDING) {
            return Reply.NONE;
        }
        return hits <= 0 ? ZERO : new Reply.Int(hits);
    }

    public Reply peekHits(String resultKey) {
        int hits = results.peek(resultKey);
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
        return endSession(request, null);
    }

    public Reply endSession(Request.EndSession request, PeerId peer) {
        if (windowCommit != null) {
            windowCommit.end(request.requestId(), request.endInfo()); // first: it reads what the session stored
        }
        results.cancelPending(resultKey(peer, request.requestId()));
        leases.end(request.requestId());
        return Reply.NONE;
    }

    /** Active lookups whose count has not been queried yet (LMCache's active_prefetch_jobs). */
    public int pendingResults() {
        return results.size();
    }
}
