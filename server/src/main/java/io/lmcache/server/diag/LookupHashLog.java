package io.lmcache.server.diag;

import io.lmcache.server.module.LookupModule;
import io.lmcache.server.protocol.CacheKey;
import java.time.Instant;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * The request side of the lookup-hash log ({@code --lookup-hash-log-dir}): each LOOKUP with a whole chunk is stamped and queued for
 * {@link LookupHashWriter}, which hashes and writes it on its own thread. Bounded in entries and in the token ids the queued keys
 * hold; when either is full the LOOKUP is counted as dropped and goes on: nothing here waits.
 *
 * <p>Salted LOOKUPs are not queued (counted): LMCache's line has no salt ({@code lookup_hash.py@366ac586}), and the salt is a
 * tenant's secret that must not be written, so a salted line would read as everyone's: the cache simulator would count hits across
 * tenants that the cache never serves, and the file would keep one tenant's prompt fingerprints beyond its isolation.
 */
public final class LookupHashLog implements LookupModule.Observer {
    static final int MAX_ENTRIES = 4096;
    /** The token ids the queued keys may hold (4 bytes each: 64 MiB). */
    static final long MAX_QUEUED_TOKENS = 16L << 20;

    /** One LOOKUP to write: when it came, its key, its whole chunks. */
    record Entry(double epochSeconds, CacheKey key, int endChunk) {}

    private final ArrayBlockingQueue<Entry> queue = new ArrayBlockingQueue<>(MAX_ENTRIES);
    private final AtomicLong queuedTokens = new AtomicLong();
    final LongAdder queueFull = new LongAdder();
    final LongAdder salted = new LongAdder();

    // runs on: lmcache-request-loop or lmcache-normal-* (the LOOKUP's handler)
    @Override
    public void looked(CacheKey key, int endChunk) {
        if (!key.cacheSalt().isEmpty()) {
            salted.increment();
            return;
        }
        long tokens = key.tokenIds().length;
        if (queuedTokens.addAndGet(tokens) > MAX_QUEUED_TOKENS) {
            queuedTokens.addAndGet(-tokens);
            queueFull.increment();
            return;
        }
        Instant now = Instant.now();
        if (!queue.offer(new Entry(now.getEpochSecond() + now.getNano() / 1e9, key, endChunk))) {
            queuedTokens.addAndGet(-tokens);
            queueFull.increment();
        }
    }

    /** The oldest queued LOOKUP, or null (the writer's thread). */
    Entry poll() {
        Entry entry = queue.poll();
        if (entry != null) {
            queuedTokens.addAndGet(-entry.key().tokenIds().length);
        }
        return entry;
    }
}
