package io.lmcache.server.agent;

import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A pool's task queue whose idle threads busy-wait up to {@code spinNs} for the next task before they park, one thread at
 * a time (the others park at once, so an idle pool holds at most one core). The spin starts afresh each time a thread
 * looks for work, so a steady stream of requests never waits for a wake-up, and a pool left idle parks after
 * {@code spinNs}. {@code config.Tuning.transferSpinNs} says when spinning is on.
 */
public final class SpinningTaskQueue extends LinkedBlockingQueue<Runnable> {
    private final long spinNs;
    private final AtomicBoolean spinning = new AtomicBoolean();
    private final AtomicBoolean primed = new AtomicBoolean();

    public SpinningTaskQueue(long spinNs) {
        this.spinNs = spinNs;
    }

    /**
     * True (once per wake-up needed) when a caller that knows a task is coming (a LOOKUP comes before the RETRIEVE of its
     * hit) should submit a no-op now, so a thread wakes off the critical path and spins for the task: spinning is on, no
     * thread spins, and no such no-op is on its way already (a burst of LOOKUPs wakes one thread, not one each).
     */
    public boolean claimPrime() {
        return spinNs > 0 && !spinning.get() && primed.compareAndSet(false, true);
    }

    /** A thread is busy-waiting for the next task (tests). */
    boolean spinning() {
        return spinning.get();
    }

    @Override
    public Runnable take() throws InterruptedException {
        primed.set(false); // a thread is looking for work: whatever primed it has been taken
        if (spinNs > 0 && spinning.compareAndSet(false, true)) {
            try {
                long deadlineNs = System.nanoTime() + spinNs;
                do {
                    // the count is read without the take lock, which the submitting thread needs to signal takers
                    Runnable task = isEmpty() ? null : poll();
                    if (task != null) {
                        return task;
                    }
                    if (Thread.interrupted()) {
                        throw new InterruptedException(); // the pool shuts down: its idle workers are interrupted
                    }
                    Thread.onSpinWait();
                } while (deadlineNs - System.nanoTime() > 0);
            } finally {
                spinning.set(false);
            }
        }
        return super.take();
    }
}
