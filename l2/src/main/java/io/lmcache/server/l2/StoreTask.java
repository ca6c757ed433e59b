package io.lmcache.server.l2;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;

/**
 * A store task whose keys answer one by one on any thread: it succeeds only if every key did, and counts the bytes
 * written (none for a task that failed), handed to {@code onDone} once after every key answered and all were sent
 * ({@link Countdown}).
 */
final class StoreTask {
    private final AtomicBoolean ok = new AtomicBoolean(true);
    private final LongAdder written = new LongAdder();
    private final Countdown countdown;

    public StoreTask(int keys, Consumer<StoreResult> onDone) {
        countdown = new Countdown(keys, () -> onDone.accept(new StoreResult(ok.get(), ok.get() ? written.sum() : 0)));
    }

    /** A key's bytes reached the store (a key already there adds none: do not call it then). */
    public void wrote(long bytes) {
        written.add(bytes);
    }

    /** A key failed: the whole task fails. */
    public void failed() {
        ok.set(false);
    }

    public void oneDone() {
        countdown.oneDone();
    }

    public void submitted() {
        countdown.submitted();
    }
}
