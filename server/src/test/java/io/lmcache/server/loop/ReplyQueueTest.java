package io.lmcache.server.loop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The hand-off from handler threads to the socket thread: order per producer, a wake-up only for a
 * consumer that said it will sleep (and at most one per sleep), nothing lost under many producers,
 * and a drain that returns everything queued.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ReplyQueueTest {

    /** A reply whose uid carries (producer, sequence). */
    private static Outbound reply(int producer, int sequence) {
        byte[] uid = ByteBuffer.allocate(8).putInt(producer).putInt(sequence).array();
        return new Outbound(new byte[] {1}, uid, new byte[] {2}, null);
    }

    private static int producer(Outbound reply) {
        return ByteBuffer.wrap(reply.uid()).getInt(0);
    }

    private static int sequence(Outbound reply) {
        return ByteBuffer.wrap(reply.uid()).getInt(4);
    }

    @Test
    void drainReturnsEveryReplyInOfferOrderThenNull() {
        ReplyQueue queue = new ReplyQueue();
        assertTrue(queue.isEmpty());
        assertNull(queue.poll());
        List<Outbound> offered = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            Outbound reply = reply(0, i);
            offered.add(reply);
            queue.offer(reply);
        }
        assertFalse(queue.isEmpty());
        for (Outbound reply : offered) {
            assertSame(reply, queue.poll());
        }
        assertNull(queue.poll());
        assertTrue(queue.isEmpty());
    }

    @Test
    void aConsumerThatLetGoIsReplacedAndOnlyItCanLetGo() {
        ReplyQueue queue = new ReplyQueue();
        AtomicInteger first = new AtomicInteger();
        AtomicInteger second = new AtomicInteger();
        ReplyQueue.Waker firstWaker = first::incrementAndGet;
        ReplyQueue.Waker secondWaker = second::incrementAndGet;
        queue.bind(firstWaker);
        queue.unbind(secondWaker);
        assertThrows(IllegalStateException.class, () -> queue.bind(secondWaker), "another consumer cannot unbind the bound one");
        queue.unbind(firstWaker);
        queue.bind(secondWaker);
        assertTrue(queue.prepareToSleep());
        queue.offer(reply(0, 0));
        assertEquals(0, first.get(), "the consumer that let go is not woken");
        assertEquals(1, second.get(), "its successor is");
    }

    @Test
    void aBusyConsumerIsNeverWoken() {
        AtomicInteger wakes = new AtomicInteger();
        ReplyQueue queue = new ReplyQueue(ReplyQueue.DEFAULT_BUDGET_BYTES, wakes::incrementAndGet);
        for (int i = 0; i < 100; i++) {
            queue.offer(reply(0, i));
        }
        assertEquals(0, wakes.get(), "no wake-up while the consumer has not said it will sleep");
    }

    @Test
    void aConsumerWithRepliesWaitingDoesNotSleepAndIsNotWoken() {
        AtomicInteger wakes = new AtomicInteger();
        ReplyQueue queue = new ReplyQueue(ReplyQueue.DEFAULT_BUDGET_BYTES, wakes::incrementAndGet);
        queue.offer(reply(0, 0));
        assertFalse(queue.prepareToSleep(), "replies are waiting: do not block");
        queue.offer(reply(0, 1));
        assertEquals(0, wakes.get(), "a consumer that did not go to sleep needs no wake-up");
    }

    @Test
    void aSleepingConsumerIsWokenOncePerSleep() {
        AtomicInteger wakes = new AtomicInteger();
        ReplyQueue queue = new ReplyQueue(ReplyQueue.DEFAULT_BUDGET_BYTES, wakes::incrementAndGet);
        assertTrue(queue.prepareToSleep(), "nothing queued: the consumer may block");
        queue.offer(reply(0, 0));
        queue.offer(reply(0, 1));
        queue.offer(reply(1, 0));
        assertEquals(1, wakes.get(), "one wake-up however many replies arrive during one sleep");
        queue.awake();
        assertEquals(3, drain(queue).size());
        assertTrue(queue.prepareToSleep());
        queue.offer(reply(0, 2));
        assertEquals(2, wakes.get(), "awake() re-arms the wake-up for the next sleep");
        queue.awake();
        queue.offer(reply(0, 3));
        assertEquals(2, wakes.get(), "awake again: no wake-up");
    }

    @Test
    void anOfferWithoutAWakerDoesNotFail() {
        ReplyQueue queue = new ReplyQueue();
        assertTrue(queue.prepareToSleep());
        queue.offer(reply(0, 0));
        assertEquals(1, drain(queue).size());
    }

    /**
     * Many handler threads against a consumer that really blocks until woken (as the socket thread
     * blocks in its receive): every reply arrives, in order per producer, and no sleep with replies
     * waiting ever has to run into its timeout (that would be a lost wake-up).
     */
    @Test
    void noReplyIsLostAndEachProducersOrderIsKeptUnderConcurrentProducers() throws Exception {
        int producers = 8;
        int perProducer = 20_000;
        Semaphore wake = new Semaphore(0);
        ReplyQueue queue = new ReplyQueue(ReplyQueue.DEFAULT_BUDGET_BYTES, wake::release);
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (int p = 0; p < producers; p++) {
            int producer = p;
            // runs on: a producer thread, like a handler pool thread
            Thread thread = new Thread(() -> {
                try {
                    start.await();
                } catch (InterruptedException e) {
                    return;
                }
                for (int i = 0; i < perProducer; i++) {
                    queue.offer(reply(producer, i));
                    if (i % 1000 == 0) {
                        Thread.yield();
                    }
                }
            }, "producer-" + p);
            thread.start();
            threads.add(thread);
        }
        int[] next = new int[producers];
        AtomicLong stalledSleeps = new AtomicLong();
        long received = 0;
        start.countDown();
        while (received < (long) producers * perProducer) {
            Outbound reply;
            while ((reply = queue.poll()) != null) {
                assertEquals(next[producer(reply)]++, sequence(reply), "producer " + producer(reply) + "'s order");
                received++;
            }
            if (received == (long) producers * perProducer) {
                break;
            }
            if (queue.prepareToSleep()) {
                // a long block: only a lost wake-up runs into it
                boolean woken = wake.tryAcquire(5, TimeUnit.SECONDS);
                queue.awake();
                if (!woken && !queue.isEmpty()) {
                    stalledSleeps.incrementAndGet();
                }
            }
        }
        for (Thread thread : threads) {
            thread.join(TimeUnit.SECONDS.toMillis(10));
        }
        assertEquals((long) producers * perProducer, received);
        for (int p = 0; p < producers; p++) {
            assertEquals(perProducer, next[p], "every reply of producer " + p);
        }
        assertEquals(0, stalledSleeps.get(), "no sleep was left with replies waiting and no wake-up");
        assertNull(queue.poll());
    }

    private static List<Outbound> drain(ReplyQueue queue) {
        List<Outbound> drained = new ArrayList<>();
        Outbound reply;
        while ((reply = queue.poll()) != null) {
            drained.add(reply);
        }
        return drained;
    }

    @Test
    void overTheByteBudgetAReplyIsDroppedAndCountedUntilTheSocketThreadTakesSome() {
        Outbound reply = new Outbound(new byte[] {1}, new byte[1000], new byte[] {2}, null);
        ReplyQueue queue = new ReplyQueue(3 * reply.bytes());
        assertTrue(queue.offer(reply));
        assertTrue(queue.offer(reply));
        assertTrue(queue.offer(reply));
        assertFalse(queue.offer(reply), "a fourth is over the budget");
        assertEquals(1, queue.dropped().sum());
        assertEquals(3 * reply.bytes(), queue.queuedBytes());
        assertSame(reply, queue.poll());
        assertTrue(queue.offer(reply), "room again once one is sent");
        assertEquals(1, queue.dropped().sum());
    }
}
