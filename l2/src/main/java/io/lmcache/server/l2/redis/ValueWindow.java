package io.lmcache.server.l2.redis;

import java.util.ArrayDeque;
import java.util.List;
import java.util.concurrent.Executor;

/**
 * At most {@code num_workers} values (SET or GET) on the wire at once, the rest waiting in order:
 * each 32 MiB value sits in a Netty buffer while it is sent or received, so this bounds the direct
 * memory a write-through backlog can take. A waiting send starts on {@code sender} when one in
 * flight ends (never inline in the ending callback, so failures that end at once cannot recurse).
 */
public final class ValueWindow {
    private final int limit;
    private final Executor sender;
    private final ArrayDeque<Runnable> waiting = new ArrayDeque<>();
    private int inFlight;
    private boolean closed;

    public ValueWindow(int limit, Executor sender) {
        this.limit = limit;
        this.sender = sender;
    }

    /** Runs {@code send} now when a place is free, else later; {@code send} must lead to exactly one {@link #release}. */
    public void submit(Runnable send) {
        synchronized (this) {
            // after close every send fails at once (the link is closed): no window to wait for
            if (!closed && inFlight >= limit) {
                waiting.add(send);
                return;
            }
            inFlight++;
        }
        send.run();
    }

    /** One value in flight ended: its place goes to the oldest waiting send. */
    public void release() {
        Runnable next;
        synchronized (this) {
            next = closed ? null : waiting.poll();
            if (next == null) {
                inFlight--;
                return;
            }
        }
        sender.execute(next);
    }

    /** No more waiting: returns the sends that never started, for the caller to run (each fails at once on the closed link). */
    public synchronized List<Runnable> close() {
        closed = true;
        List<Runnable> never = List.copyOf(waiting);
        inFlight += never.size();
        waiting.clear();
        return never;
    }

    public synchronized int inFlight() {
        return inFlight;
    }

    public synchronized int waiting() {
        return waiting.size();
    }
}
