package io.lmcache.server.loop;

import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Hands finished replies from handler threads to the one thread that owns the ROUTER socket. A
 * producer wakes that thread only when it has said it is about to block, and at most once per
 * sleep, so a busy server pays nothing per reply beyond the queue.
 */
public final class ReplyQueue {
    /** Interrupts the socket thread's blocking receive. */
    public interface Waker {
        void wake();
    }

    private final ConcurrentLinkedQueue<Outbound> queue = new ConcurrentLinkedQueue<>();
    private final AtomicBoolean wakePending = new AtomicBoolean();
    private volatile boolean consumerSleeping;
    private volatile Waker waker = () -> {};

    public void setWaker(Waker waker) {
        this.waker = waker;
    }

    /** Producer side: any thread. */
    public void offer(Outbound reply) {
        queue.offer(reply);
        if (consumerSleeping && wakePending.compareAndSet(false, true)) {
            waker.wake();
        }
    }

    /** Consumer side: the next reply, or null. */
    public Outbound poll() {
        return queue.poll();
    }

    public boolean isEmpty() {
        return queue.isEmpty();
    }

    /**
     * Consumer side, before blocking: false (do not block) when replies are already waiting. The
     * volatile write before the emptiness check pairs with the producer's offer-then-read, so a
     * reply is never left behind a sleeping consumer.
     */
    public boolean prepareToSleep() {
        consumerSleeping = true;
        if (!queue.isEmpty()) {
            consumerSleeping = false;
            return false;
        }
        return true;
    }

    /** Consumer side, after waking; re-arms the wake-up. */
    public void awake() {
        consumerSleeping = false;
        wakePending.set(false);
    }
}
