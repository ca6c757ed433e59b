package io.lmcache.server.transfer;

import io.lmcache.server.agent.NamedThreads;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * {@code --test-hooks} only: makes host copies complete the way GPU copies do, after the reply. The bytes still move before
 * the reply; the completion (a STORE's commit or abort, a RETRIEVE's unpin) runs {@code delayNs} later on a thread of its
 * own, and the next {@code failStores} STOREs report a failed copy. Lets a host-only test reproduce the timing of LMCache's
 * adapter on a GPU host: a STORE answered, its chunks not yet committed, the next LOOKUP already sent.
 */
public final class CompletionDelay implements AutoCloseable {
    private final ScheduledExecutorService completions =
            Executors.newSingleThreadScheduledExecutor(task -> NamedThreads.thread("lmcache-test-completions", true, task));
    private final AtomicInteger failStores = new AtomicInteger();
    private volatile long delayNs;

    /** From the test route: the delay for copies from now on (0: inline again) and how many STOREs to fail. */
    public void set(long delayNs, int failStores) {
        this.delayNs = Math.max(0, delayNs);
        this.failStores.set(Math.max(0, failStores));
    }

    long delayNs() {
        return delayNs;
    }

    /** Whether this STORE's copy is to be reported failed (counts one down). */
    boolean failThisStore() {
        return failStores.getAndUpdate(n -> n > 0 ? n - 1 : 0) > 0;
    }

    void later(long delayNs, Runnable completion) {
        completions.schedule(completion, delayNs, TimeUnit.NANOSECONDS);
    }

    @Override
    public void close() {
        completions.shutdownNow();
    }
}
