package io.lmcache.server.module;

import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * LOOKUP results waiting for QUERY_PREFETCH_STATUS, by request id: returned once, then forgotten.
 * Bounded in count and age, so a scheduler that never queries cannot grow it without limit.
 */
public final class PrefetchResults {
    static final int MAX_RESULTS = 1 << 20;

    private record Result(int hits, long createdNs) {}

    private final long ttlNs;
    private final LongSupplier clockNs;
    private final LinkedHashMap<String, Result> results = new LinkedHashMap<>();

    public PrefetchResults(long ttlNs, LongSupplier clockNs) {
        this.ttlNs = ttlNs;
        this.clockNs = clockNs;
    }

    public synchronized void put(String requestId, int hits) {
        results.remove(requestId);
        results.put(requestId, new Result(hits, clockNs.getAsLong()));
        if (results.size() > MAX_RESULTS) {
            Iterator<String> oldest = results.keySet().iterator();
            oldest.next();
            oldest.remove();
        }
    }

    /** The hit count, once; -1 when there is none (unknown id, already taken, or expired). */
    public synchronized int take(String requestId) {
        Result result = results.remove(requestId);
        return result == null ? -1 : result.hits();
    }

    /** The hit count without consuming it; -1 when there is none. */
    public synchronized int peek(String requestId) {
        Result result = results.get(requestId);
        return result == null ? -1 : result.hits();
    }

    /** Drops results older than the read TTL. Runs on lmcache-housekeeping (an eviction-tick sweeper). */
    public synchronized int sweep() {
        long nowNs = clockNs.getAsLong();
        int dropped = 0;
        for (Iterator<Map.Entry<String, Result>> it = results.entrySet().iterator(); it.hasNext(); ) {
            if (nowNs - it.next().getValue().createdNs() - ttlNs > 0) {
                it.remove();
                dropped++;
            } else {
                break; // insertion order is age order
            }
        }
        return dropped;
    }

    public synchronized int size() {
        return results.size();
    }
}
