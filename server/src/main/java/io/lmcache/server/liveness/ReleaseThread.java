package io.lmcache.server.liveness;

import io.lmcache.server.agent.Agent;
import io.lmcache.server.agent.NamedThreads;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.DelayQueue;
import java.util.concurrent.Delayed;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one thread that frees native resources (Aeron's managed resources): it serves the
 * end-of-life queue in order. Bounded time per release: the worker records when its current
 * release started, and {@link #doWork()} (the watchdog, an agent on the housekeeping thread)
 * abandons a release that runs past {@code releaseTimeoutNs}: it is counted, and a fresh worker
 * serves the rest of the queue. At most {@code maxAbandoned} abandoned workers may be stuck at
 * once; past that the cap is counted and the watchdog waits for one to come back. A release that
 * throws is counted and retried with exponential backoff, {@code maxAttempts} times in all.
 *
 * <p>The queue is bounded by {@code capacity}: every entry is one registration that left its
 * registry (each context is enqueued exactly once, when it is closed and its last lease is back),
 * so it only fills when releases stall across that many registrations; an entry that does not
 * fit is counted as dropped (its mapping leaks) rather than blocking or running on the caller.
 */
public final class ReleaseThread implements EndOfLifeQueue, Agent, AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ReleaseThread.class);
    private static final long POLL_NS = TimeUnit.MILLISECONDS.toNanos(100);
    /** Marks a worker whose release the watchdog gave up on. */
    private static final Running ABANDONED = new Running(null, 0);

    private final long releaseTimeoutNs;
    private final int capacity;
    private final int maxAttempts;
    private final long backoffNs;
    private final int maxAbandoned;
    private final ThreadFactory threads = NamedThreads.factory("lmcache-release");
    private final DelayQueue<Item> queue = new DelayQueue<>();
    private final AtomicInteger queued = new AtomicInteger();
    private final AtomicLong sequence = new AtomicLong();
    private final AtomicInteger abandonedAlive = new AtomicInteger();
    private final AtomicBoolean blockNext = new AtomicBoolean();
    private final CountDownLatch never = new CountDownLatch(1);
    private final LongAdder completed = new LongAdder();
    private final LongAdder failures = new LongAdder();
    private final LongAdder retries = new LongAdder();
    private final LongAdder gaveUp = new LongAdder();
    private final LongAdder timeouts = new LongAdder();
    private final LongAdder capHits = new LongAdder();
    private final LongAdder dropped = new LongAdder();
    private volatile boolean accepting = true;
    private volatile boolean running = true;
    /** Written by the watchdog only (and the constructor). */
    private volatile Worker worker;
    /** The release for which the cap was last counted, so one stuck release counts once. */
    private Running capNoted;

    private record Item(String what, Release release, int attempt, long notBeforeNs, long seq) implements Delayed {
        @Override
        public long getDelay(TimeUnit unit) {
            return unit.convert(notBeforeNs - System.nanoTime(), TimeUnit.NANOSECONDS);
        }

        @Override
        public int compareTo(Delayed other) {
            Item that = (Item) other;
            long byTime = notBeforeNs - that.notBeforeNs;
            if (byTime != 0) {
                return byTime < 0 ? -1 : 1;
            }
            return Long.compare(seq, that.seq);
        }
    }

    private record Running(Item item, long startedNs) {}

    public ReleaseThread(long releaseTimeoutNs, int capacity, int maxAttempts, long backoffNs, int maxAbandoned) {
        this.releaseTimeoutNs = releaseTimeoutNs;
        this.capacity = capacity;
        this.maxAttempts = Math.max(1, maxAttempts);
        this.backoffNs = backoffNs;
        this.maxAbandoned = maxAbandoned;
        this.worker = startWorker();
    }

    /** The production settings: 4096 queued releases, 3 attempts 100 ms apart (doubling), at most 4 abandoned workers. */
    public static ReleaseThread withTimeout(long releaseTimeoutNs) {
        return new ReleaseThread(releaseTimeoutNs, 4096, 3, TimeUnit.MILLISECONDS.toNanos(100), 4);
    }

    @Override
    public boolean enqueue(String what, Release release) {
        if (!accepting) {
            // shutdown: the thread is gone; freeing on the closer's thread is the only way left
            runInline(what, release);
            return true;
        }
        if (queued.incrementAndGet() > capacity) {
            queued.decrementAndGet();
            dropped.increment();
            LOG.error("release queue full ({} waiting: releases are stalled); {} is not freed", capacity, what);
            return false;
        }
        Item item = new Item(what, release, 0, System.nanoTime(), sequence.incrementAndGet());
        queue.add(item);
        if (!accepting && queue.remove(item)) {
            // close() ran between the check and the add: no worker will serve it any more
            queued.decrementAndGet();
            runInline(what, release);
        }
        return true;
    }

    private void runInline(String what, Release release) {
        try {
            release.run();
            completed.increment();
        } catch (Exception | Error e) {
            failures.increment();
            LOG.warn("release of {} at shutdown failed", what, e);
        }
    }

    /** Test hook ({@code --test-hooks}): the next release blocks forever, as a close stuck in the driver would. */
    public void blockNextRelease() {
        blockNext.set(true);
    }

    private Worker startWorker() {
        Worker created = new Worker();
        // runs on: lmcache-release-N (a replacement after an abandon takes the next N)
        created.thread = threads.newThread(created);
        created.thread.start();
        return created;
    }

    /** One serving thread; when the watchdog abandons it, it exits as soon as its release returns (if ever). */
    private final class Worker implements Runnable {
        final AtomicReference<Running> current = new AtomicReference<>();
        /** Set before the thread starts; the watchdog replaces a worker whose thread died. */
        volatile Thread thread;

        @Override
        public void run() {
            while (running) {
                Item item;
                try {
                    item = queue.poll(POLL_NS, TimeUnit.NANOSECONDS);
                } catch (InterruptedException e) {
                    // a release may leave the flag set: nobody interrupts this thread to stop it (running does)
                    continue;
                }
                if (item == null) {
                    continue;
                }
                Running now = new Running(item, System.nanoTime());
                current.set(now);
                Throwable failed = null;
                try {
                    if (blockNext.compareAndSet(true, false)) {
                        never.await();
                    }
                    item.release().run();
                } catch (Exception | Error e) {
                    failed = e;
                }
                if (!current.compareAndSet(now, null)) {
                    // abandoned by the watchdog: a replacement serves the queue; this thread only leaves
                    abandonedAlive.decrementAndGet();
                    queued.decrementAndGet();
                    LOG.warn("the abandoned release of {} returned after all ({})", item.what(), failed == null ? "ok" : failed.toString());
                    return;
                }
                finish(item, failed);
            }
        }
    }

    private void finish(Item item, Throwable failed) {
        if (failed == null) {
            completed.increment();
            queued.decrementAndGet();
            return;
        }
        failures.increment();
        if (item.attempt() + 1 < maxAttempts && running) {
            retries.increment();
            long delayNs = backoffNs << item.attempt();
            LOG.warn("release of {} failed (attempt {} of {}), retrying in {} ms: {}", item.what(), item.attempt() + 1, maxAttempts,
                    TimeUnit.NANOSECONDS.toMillis(delayNs), failed.toString());
            queue.add(new Item(item.what(), item.release(), item.attempt() + 1, System.nanoTime() + delayNs, sequence.incrementAndGet()));
        } else {
            gaveUp.increment();
            queued.decrementAndGet();
            LOG.error("release of {} failed {} time(s); giving up", item.what(), item.attempt() + 1, failed);
        }
    }

    /** The watchdog: abandons a release past its time and starts a replacement worker (synchronized: close() calls it too). */
    @Override
    public synchronized int doWork() {
        if (!running) {
            return 0;
        }
        Worker w = worker;
        Running r = w.current.get();
        if (r == null) {
            if (!w.thread.isAlive()) {
                LOG.error("the release thread {} died; starting another", w.thread.getName());
                return replace();
            }
            return 0;
        }
        if (r == ABANDONED) {
            return replace();
        }
        long nowNs = System.nanoTime();
        if (r.startedNs() + releaseTimeoutNs - nowNs >= 0) {
            return 0;
        }
        if (abandonedAlive.get() >= maxAbandoned) {
            if (capNoted != r) {
                capNoted = r;
                capHits.increment();
                LOG.error("release of {} is past its {} ms, but {} abandoned release threads are stuck already; waiting for it",
                        r.item().what(), TimeUnit.NANOSECONDS.toMillis(releaseTimeoutNs), maxAbandoned);
            }
            return 0;
        }
        if (!w.current.compareAndSet(r, ABANDONED)) {
            return 0;
        }
        abandonedAlive.incrementAndGet();
        timeouts.increment();
        LOG.error("release of {} did not finish within {} ms (a close stuck in the driver?); abandoning its thread, the queue goes on",
                r.item().what(), TimeUnit.NANOSECONDS.toMillis(releaseTimeoutNs));
        return 1 + replace();
    }

    private int replace() {
        if (!running) {
            return 0;
        }
        worker = startWorker();
        return 1;
    }

    @Override
    public String roleName() {
        return "release-watchdog";
    }

    /** Releases queued and not finished (in the queue, running, or waiting for a retry). */
    public int pending() {
        return queued.get();
    }

    public long completed() {
        return completed.sum();
    }

    public long failures() {
        return failures.sum();
    }

    public long retries() {
        return retries.sum();
    }

    public long gaveUp() {
        return gaveUp.sum();
    }

    public long timeouts() {
        return timeouts.sum();
    }

    public long abandonedCapHits() {
        return capHits.sum();
    }

    public long dropped() {
        return dropped.sum();
    }

    public int abandonedThreads() {
        return abandonedAlive.get();
    }

    public void resetCounters() {
        for (LongAdder adder : new LongAdder[] {completed, failures, retries, gaveUp, timeouts, capHits, dropped}) {
            adder.reset();
        }
    }

    /**
     * Lets the workers serve what is queued for up to one release timeout in all, then stops them;
     * what is still queued then (and every later release) runs on the caller's thread. A release
     * stuck on a worker stays abandoned: the process is exiting.
     */
    @Override
    public void close() {
        long deadlineNs = System.nanoTime() + releaseTimeoutNs;
        while (queued.get() > 0 && System.nanoTime() - deadlineNs < 0) {
            doWork();
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
        }
        accepting = false;
        running = false;
        for (Item item : queue.toArray(new Item[0])) {
            if (queue.remove(item)) {
                queued.decrementAndGet();
                runInline(item.what(), item.release());
            }
        }
        if (queued.get() > 0) {
            LOG.warn("{} release(s) still running at shutdown (stuck in the driver?)", queued.get());
        }
    }
}
