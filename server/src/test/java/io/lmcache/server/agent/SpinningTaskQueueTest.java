package io.lmcache.server.agent;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class SpinningTaskQueueTest {
    @Test
    void anIdleTakerSpinsForTheNextTaskAndOnePrimeIsEnough() throws Exception {
        SpinningTaskQueue queue = new SpinningTaskQueue(TimeUnit.SECONDS.toNanos(30));
        assertTrue(queue.claimPrime(), "nobody spins yet: a coming task needs a wake-up");
        assertFalse(queue.claimPrime(), "one no-op on its way is enough");
        CompletableFuture<Runnable> taken = CompletableFuture.supplyAsync(() -> {
            try {
                return queue.take();
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        await().atMost(Duration.ofSeconds(10)).until(queue::spinning);
        assertFalse(queue.claimPrime(), "a thread spins: the task needs no wake-up");
        Runnable task = () -> { };
        queue.offer(task);
        assertSame(task, taken.get(10, TimeUnit.SECONDS), "the spinning taker got it");
        assertTrue(queue.claimPrime(), "the taker left: the next task needs a wake-up again");
    }

    @Test
    void aSpinningTakerStopsWhenInterruptedAsAPoolThatShutsDownInterruptsIt() throws Exception {
        SpinningTaskQueue queue = new SpinningTaskQueue(TimeUnit.SECONDS.toNanos(60));
        CompletableFuture<Boolean> interrupted = new CompletableFuture<>();
        Thread taker = new Thread(() -> {
            try {
                queue.take();
                interrupted.complete(false);
            } catch (InterruptedException e) {
                interrupted.complete(true);
            }
        });
        taker.start();
        await().atMost(Duration.ofSeconds(10)).until(queue::spinning);
        taker.interrupt();
        assertTrue(interrupted.get(10, TimeUnit.SECONDS), "left its 60 s spin with an InterruptedException");
        taker.join(TimeUnit.SECONDS.toMillis(10));
        assertFalse(queue.spinning(), "and let go of the spinning flag");
    }

    @Test
    void withSpinningOffNothingNeedsPriming() throws Exception {
        SpinningTaskQueue queue = new SpinningTaskQueue(0);
        assertFalse(queue.claimPrime(), "no spinning: nothing to prime");
        Runnable task = () -> { };
        queue.offer(task);
        assertSame(task, queue.take());
    }
}
