package io.lmcache.server.loop;

import io.lmcache.server.logging.RateLimitedLog;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Hands finished replies from handler threads to the one thread that owns the ROUTER socket. A
 * producer wakes that thread only when it has said it is about to block, and at most once per
 * sleep, so a busy server pays nothing per reply beyond the queue.
 *
 * <p>The bytes queued here are bounded ({@link #DEFAULT_BUDGET_BYTES}): past the budget a reply is
 * dropped and counted. It is a safety net: the socket thread never blocks on a send (a peer that
 * does not read loses its replies at the ROUTER instead, see {@code RequestLoop}) and stops reading
 * requests while 16 384 are unanswered, so the queue holds at most about that many small replies
 * unless the socket thread itself is stuck.
 */
public final class ReplyQueue {
    private static final Logger LOG = LoggerFactory.getLogger(ReplyQueue.class);
    /** 64 MiB: some 500 000 replies of the usual size (under 128 bytes), 30 times what the in-flight limit lets queue up. */
    public static final long DEFAULT_BUDGET_BYTES = 64L << 20;

    /** Interrupts the socket thread's blocking receive. */
    public interface Waker {
        void wake();
    }

    private final ConcurrentLinkedQueue<Outbound> queue = new ConcurrentLinkedQueue<>();
    private final AtomicBoolean wakePending = new AtomicBoolean();
    private volatile boolean consumerSleeping;
    private static final Waker UNBOUND = () -> { };
    /** The consumer's wake-up: given at construction, or bound once by the request loop that consumes this queue. */
    private volatile Waker waker;
    private final long budgetBytes;
    private final AtomicLong queuedBytes = new AtomicLong();
    private final LongAdder dropped = new LongAdder();
    private final RateLimitedLog dropLog = new RateLimitedLog(LOG, 1);

    public ReplyQueue() {
        this(DEFAULT_BUDGET_BYTES);
    }

    public ReplyQueue(long budgetBytes) {
        this(budgetBytes, UNBOUND);
    }

    /** {@code consumer}: wakes the consumer when it sleeps (a consumer known before the queue: tests). */
    public ReplyQueue(long budgetBytes, Waker consumer) {
        this.budgetBytes = budgetBytes;
        this.waker = consumer;
    }

    /**
     * The request loop's constructor: the loop is the queue's one consumer, made after the producers that take the queue
     * (dispatcher, KV-event streams), so it binds its wake-up here, once, as a runner binds its thread to an {@code agent.Wake}.
     */
    void bind(Waker consumer) {
        if (waker != UNBOUND) {
            throw new IllegalStateException("a reply queue serves one consumer");
        }
        waker = consumer;
    }

    /**
     * The request loop, its context closed: the queue may take another consumer (the warm-up's scratch server moves its loop
     * from loopback TCP to in-process before ready, with no request in flight). A wake meanwhile goes to the closed loop, which
     * ignores it.
     */
    void unbind(Waker consumer) {
        if (waker == consumer) {
            waker = UNBOUND;
        }
    }

    /** Producer side: any thread. False (the reply dropped and counted) when the queue is over its byte budget. */
    public boolean offer(Outbound reply) {
        boolean queued = offerQuietly(reply);
        wakeConsumer();
        return queued;
    }

    /**
     * Producer side: queues a reply without waking the consumer; the producer calls {@link #wakeConsumer} after the last of
     * several (the KV-event streams' batches of one pass: one wake of the socket thread instead of one per subscriber).
     */
    public boolean offerQuietly(Outbound reply) {
        long bytes = reply.bytes();
        if (queuedBytes.addAndGet(bytes) > budgetBytes) {
            queuedBytes.addAndGet(-bytes);
            dropped.increment();
            dropLog.warn("reply dropped: {} MiB of replies already wait for the socket thread (budget {} MiB)",
                    queuedBytes.get() >> 20, budgetBytes >> 20);
            return false;
        }
        queue.offer(reply);
        return true;
    }

    /** Producer side: wakes the consumer if it sleeps, at most once per sleep (after {@link #offerQuietly}). */
    public void wakeConsumer() {
        if (consumerSleeping && wakePending.compareAndSet(false, true)) {
            waker.wake();
        }
    }

    /** Consumer side: the next reply, or null. */
    public Outbound poll() {
        Outbound reply = queue.poll();
        if (reply != null) {
            queuedBytes.addAndGet(-reply.bytes());
        }
        return reply;
    }

    /** Replies dropped over the byte budget (read by the metrics). */
    public LongAdder dropped() {
        return dropped;
    }

    /** Bytes of the replies waiting now. */
    public long queuedBytes() {
        return queuedBytes.get();
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
