package io.lmcache.server.module;

import io.lmcache.server.tables.BoundedTable;
import java.util.function.LongSupplier;

/**
 * LOOKUP results waiting for QUERY_PREFETCH_STATUS, by request id: returned once, then forgotten.
 * A LOOKUP that loads from L2 leaves a pending entry, answered as "still running" until its
 * prefetch completes it. Bounded in count, bytes (request ids counted, a long id kept only as its digest) and age, so a
 * scheduler that never queries, or sends megabyte request ids, cannot grow it without limit: past a cap the oldest result is
 * dropped (counted in {@code lmcache_mp_table_evictions_total{table="lookup_results"}}; its QUERY then answers 0, a miss).
 */
public final class PrefetchResults {
    static final int MAX_RESULTS = 1 << 18;
    /** Bytes of the table: results live from a LOOKUP to its QUERY, milliseconds for a scheduler that queries. */
    static final long MAX_BYTES = 32L << 20;
    /** A result's own cost beyond its key and entry. */
    private static final long RESULT_BYTES = 40;
    /** {@link #take}: the request's prefetch is still running. */
    public static final int PENDING = -2;

    /** {@code token}: which LOOKUP of the request id this is, so a late prefetch never completes a newer one. */
    private record Result(int hits, boolean pending, long token, long createdNs) {}

    private final long ttlNs;
    private final LongSupplier clockNs;
    private final BoundedTable<Result> results;
    private long nextToken = 1;

    public PrefetchResults(long ttlNs, LongSupplier clockNs) {
        this(ttlNs, clockNs, MAX_RESULTS, MAX_BYTES);
    }

    PrefetchResults(long ttlNs, LongSupplier clockNs, int maxResults, long maxBytes) {
        this.ttlNs = ttlNs;
        this.clockNs = clockNs;
        this.results = new BoundedTable<>("lookup_results", maxResults, maxBytes);
    }

    /** The table, for its gauges. */
    public BoundedTable<?> table() {
        return results;
    }

    public synchronized void put(String requestId, int hits) {
        add(requestId, new Result(hits, false, 0, clockNs.getAsLong()));
    }

    /** A LOOKUP whose prefetch runs: {@code l1Hits} is what {@link #peek} shows meanwhile; returns the token that completes it. */
    public synchronized long putPending(String requestId, int l1Hits) {
        long token = nextToken++;
        add(requestId, new Result(l1Hits, true, token, clockNs.getAsLong()));
        return token;
    }

    /**
     * Hands a pending LOOKUP on to the next step that completes it (its L2 prefetch, after its writes in flight ended):
     * the new token, or 0 when {@code token} is no longer the request's pending LOOKUP (ended or replaced meanwhile).
     */
    public synchronized long renewPending(String requestId, long token) {
        Result result = results.get(requestId);
        if (result == null || !result.pending() || result.token() != token) {
            return 0;
        }
        long renewed = nextToken++;
        results.replace(requestId, new Result(result.hits(), true, renewed, result.createdNs()));
        return renewed;
    }

    private void add(String requestId, Result result) {
        results.put(requestId, result, RESULT_BYTES, null);
    }

    /**
     * Completes the pending LOOKUP {@code token} with {@code hits}: runs {@code beforePublish} (the lease is recorded before a
     * client can see the count and retrieve) and returns true; false when that LOOKUP was replaced, ended or expired meanwhile.
     */
    public synchronized boolean complete(String requestId, long token, int hits, Runnable beforePublish) {
        Result result = results.get(requestId);
        if (result == null || !result.pending() || result.token() != token) {
            return false;
        }
        beforePublish.run();
        add(requestId, new Result(hits, false, 0, clockNs.getAsLong()));
        notifyAll();
        return true;
    }

    /** Forgets a pending LOOKUP (END_SESSION): its prefetch then releases what it loaded. */
    public synchronized void cancelPending(String requestId) {
        Result result = results.get(requestId);
        if (result != null && result.pending()) {
            results.remove(requestId);
        }
    }

    /** The hit count, once; {@link #PENDING} while its prefetch runs; -1 when there is none (unknown id, already taken, or expired). */
    public synchronized int take(String requestId) {
        Result result = results.get(requestId);
        if (result == null) {
            return -1;
        }
        if (result.pending()) {
            return PENDING;
        }
        results.remove(requestId);
        return result.hits();
    }

    /** As {@link #take}, waiting up to {@code timeoutNs} for a running prefetch (WAIT_PREFETCH_STATUS, on a CPU worker). */
    public synchronized int await(String requestId, long timeoutNs) throws InterruptedException {
        long deadlineNs = System.nanoTime() + timeoutNs;
        int hits = take(requestId);
        while (hits == PENDING && deadlineNs - System.nanoTime() > 0) {
            long waitNs = deadlineNs - System.nanoTime();
            wait(Math.max(1, waitNs / 1_000_000), 0);
            hits = take(requestId);
        }
        return hits;
    }

    /** The hit count without consuming it (the L1 part while a prefetch runs); -1 when there is none. */
    public synchronized int peek(String requestId) {
        Result result = results.get(requestId);
        return result == null ? -1 : result.hits();
    }

    /** Drops results older than the read TTL. Runs on lmcache-housekeeping (an eviction-tick sweeper). */
    public synchronized int sweep() {
        long nowNs = clockNs.getAsLong();
        return results.removeOldestWhile(result -> nowNs - result.createdNs() - ttlNs > 0, null); // insertion order is age order
    }

    public synchronized int size() {
        return results.size();
    }
}
