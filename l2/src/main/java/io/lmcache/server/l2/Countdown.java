package io.lmcache.server.l2;

import java.util.concurrent.atomic.AtomicInteger;

/** A task's per-key completions plus the submitter's own: {@code onDone} runs once, after every key answered and all were sent. */
final class Countdown {
    private final AtomicInteger remaining;
    private final Runnable onDone;

    Countdown(int keys, Runnable onDone) {
        this.remaining = new AtomicInteger(keys + 1);
        this.onDone = onDone;
    }

    void oneDone() {
        if (remaining.decrementAndGet() == 0) {
            onDone.run();
        }
    }

    /** Every key was handed on: a task of no keys, or whose keys all answered already, completes now. */
    void submitted() {
        oneDone();
    }
}
