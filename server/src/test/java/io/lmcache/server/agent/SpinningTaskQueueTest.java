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
    void anIdleTakerSpinsForTheNextTaskThenParks() throws Exception {
        SpinningTaskQueue queue = new SpinningTaskQueue(TimeUnit.SECONDS.toNanos(30));
        assertFalse(queue.ready(), "nobody spins yet: a coming task would need a wake-up");
        CompletableFuture<Runnable> taken = CompletableFuture.supplyAsync(() -> {
            try {
                return queue.take();
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        await().atMost(Duration.ofSeconds(10)).until(queue::ready);
        Runnable task = () -> { };
        queue.offer(task);
        assertSame(task, taken.get(10, TimeUnit.SECONDS), "the spinning taker got it");
        await().atMost(Duration.ofSeconds(10)).until(() -> !queue.ready());
    }

    @Test
    void withSpinningOffNothingNeedsPriming() throws Exception {
        SpinningTaskQueue queue = new SpinningTaskQueue(0);
        assertTrue(queue.ready());
        Runnable task = () -> { };
        queue.offer(task);
        assertSame(task, queue.take());
    }
}
