package io.lmcache.server.storage;

import io.lmcache.server.logging.RateLimitedLog;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.LoggerFactory;

/**
 * The writes in flight one lookup ran into. A STORE reserves its chunks (WRITING) as it is handled
 * and publishes them when its copy ends, which on a GPU comes after the reply; LMCache's scheduler
 * sends the next request's LOOKUP as soon as the worker has that reply. So a lookup counts such a
 * chunk as pending: it registers here, under the store's lock and in the same step that saw the
 * object WRITING (no end can be missed), and runs again once every one of them has ended
 * (published, aborted or reclaimed). One instance per lookup pass.
 */
public final class PendingFills {
    /**
     * Waits on fills, all lookups and objects together: each holds its pass (hashes) until the fill ends, and a fill can take
     * up to the write lock's TTL, so a flood of LOOKUPs on a write that never completes must not grow the heap. Past it a
     * lookup counts such a chunk as a miss (counted).
     */
    public static final int MAX_WAITING = 16_384;
    private static final RateLimitedLog FAILED = new RateLimitedLog(LoggerFactory.getLogger(PendingFills.class),
            "LOOKUPs after writes failed", 10);

    /** One per watched fill not ended yet, plus the lookup's own hold until {@link #arm}. */
    private final AtomicInteger open = new AtomicInteger(1);
    private int watched; // written and read by the lookup's thread (under the store's lock while it scans)
    private volatile Runnable then;

    /** Under the store's lock: {@code object} is WRITING and part of the lookup's hit. */
    void watch(StoredObject object) {
        open.incrementAndGet();
        watched++;
        object.watch(this);
    }

    /** Outside the store's lock, once per watched fill. */
    void ended() {
        if (open.decrementAndGet() == 0) {
            then.run();
        }
    }

    /**
     * Tells each lookup that a fill it watched ended (outside the store's lock; lmcache-cuda-events, a transfer thread,
     * housekeeping or lmcache-l2). A lookup's second pass must never break the commit, abort or sweep that ended its writes.
     */
    static void tell(PendingFills[] ended) {
        for (PendingFills lookup : ended) {
            try {
                lookup.ended();
            } catch (RuntimeException e) {
                FAILED.error("a LOOKUP waiting for writes in flight failed when they ended: {}", e.toString());
            }
        }
    }

    /** Whether the lookup met any write in flight. */
    public boolean any() {
        return watched > 0;
    }

    /**
     * Runs {@code then} once every watched fill has ended, on the thread that ended the last one, and returns true; returns
     * false, never running it, when they have all ended already (the caller then looks again itself).
     */
    public boolean arm(Runnable then) {
        this.then = then;
        return open.decrementAndGet() != 0;
    }
}
