package io.lmcache.server.liveness;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The release thread: order, retries with backoff, the watchdog's timeout and cap, the bound on the queue. */
class ReleaseThreadTest {
    private static final long TIMEOUT_NS = 100_000_000L;
    private static final Duration BOUND = Duration.ofSeconds(10);

    private final CountDownLatch unblock = new CountDownLatch(1);
    private final List<String> released = Collections.synchronizedList(new ArrayList<>());
    private ReleaseThread releases;

    @AfterEach
    void stop() {
        unblock.countDown();
        if (releases != null) {
            releases.close();
        }
    }

    private ReleaseThread start(int capacity, int maxAttempts, int maxAbandoned) {
        releases = new ReleaseThread(TIMEOUT_NS, capacity, maxAttempts, 1_000_000L, maxAbandoned);
        return releases;
    }

    private EndOfLifeQueue.Release record(String name) {
        return () -> released.add(name);
    }

    private EndOfLifeQueue.Release hang(String name) {
        return () -> {
            unblock.await();
            released.add(name);
        };
    }

    /** Runs the watchdog until the condition holds (the housekeeping thread does this in the server). */
    private void watchUntil(Callable<Boolean> condition) {
        await().atMost(BOUND).pollInterval(Duration.ofMillis(10)).until(() -> {
            releases.doWork();
            return condition.call();
        });
    }

    @Test
    void releasesRunInOrderOnTheReleaseThread() {
        ReleaseThread releases = start(16, 3, 4);
        List<String> threads = Collections.synchronizedList(new ArrayList<>());
        for (int i = 0; i < 5; i++) {
            String name = "r" + i;
            assertTrue(releases.enqueue(name, () -> {
                threads.add(Thread.currentThread().getName());
                released.add(name);
            }));
        }
        await().atMost(BOUND).until(() -> releases.completed() == 5);
        assertEquals(List.of("r0", "r1", "r2", "r3", "r4"), released);
        assertTrue(threads.stream().allMatch(name -> name.startsWith("lmcache-release")), threads.toString());
        assertEquals(0, releases.pending());
    }

    @Test
    void aFailingReleaseIsCountedAndRetried() {
        ReleaseThread releases = start(16, 3, 4);
        AtomicInteger attempts = new AtomicInteger();
        releases.enqueue("flaky", () -> {
            if (attempts.incrementAndGet() < 3) {
                throw new IOException("transient");
            }
            released.add("flaky");
        });
        await().atMost(BOUND).until(() -> releases.completed() == 1);
        assertEquals(3, attempts.get());
        assertEquals(2, releases.failures());
        assertEquals(2, releases.retries());
        assertEquals(0, releases.gaveUp());
        assertEquals(0, releases.pending());
    }

    @Test
    void aReleaseThatKeepsFailingIsGivenUpAfterItsAttempts() {
        ReleaseThread releases = start(16, 3, 4);
        releases.enqueue("broken", () -> {
            throw new IllegalStateException("always");
        });
        releases.enqueue("after", record("after"));
        await().atMost(BOUND).until(() -> releases.gaveUp() == 1 && releases.completed() == 1);
        assertEquals(3, releases.failures());
        assertEquals(List.of("after"), released, "the queue went on while the broken one waited for its retries");
        assertEquals(0, releases.pending());
    }

    @Test
    void aReleaseThatHangsIsCountedAndAbandonedAndTheQueueGoesOn() {
        ReleaseThread releases = start(16, 3, 4);
        releases.enqueue("stuck", hang("stuck"));
        releases.enqueue("next", record("next"));
        watchUntil(() -> released.contains("next"));
        assertEquals(1, releases.timeouts());
        assertEquals(1, releases.abandonedThreads());
        unblock.countDown();
        await().atMost(BOUND).until(() -> releases.abandonedThreads() == 0);
        assertEquals(0, releases.pending());
    }

    @Test
    void pastTheCapOfAbandonedThreadsTheWatchdogCountsAndWaits() {
        ReleaseThread releases = start(16, 3, 1);
        releases.enqueue("stuck-1", hang("stuck-1"));
        releases.enqueue("stuck-2", hang("stuck-2"));
        releases.enqueue("last", record("last"));
        watchUntil(() -> releases.abandonedCapHits() == 1);
        assertEquals(1, releases.timeouts(), "only the first was abandoned");
        for (int i = 0; i < 5; i++) {
            releases.doWork();
        }
        assertEquals(1, releases.abandonedCapHits(), "one stuck release counts once");
        assertFalse(released.contains("last"));
        unblock.countDown();
        watchUntil(() -> released.contains("last"));
        assertEquals(1, releases.abandonedCapHits());
    }

    @Test
    void aFullQueueDropsAndCountsInsteadOfBlocking() {
        ReleaseThread releases = start(2, 3, 4);
        assertTrue(releases.enqueue("a", hang("a")));
        assertTrue(releases.enqueue("b", record("b")));
        assertFalse(releases.enqueue("c", record("c")), "the queue holds 2");
        assertEquals(1, releases.dropped());
    }

    @Test
    void theTestHookBlocksTheNextReleaseForever() {
        ReleaseThread releases = start(16, 3, 4);
        releases.blockNextRelease();
        releases.enqueue("blocked", record("blocked"));
        releases.enqueue("free", record("free"));
        watchUntil(() -> released.contains("free"));
        assertEquals(1, releases.timeouts());
        assertFalse(released.contains("blocked"), "the blocked release never ran");
    }

    @Test
    void afterCloseReleasesRunOnTheCaller() {
        ReleaseThread releases = start(16, 3, 4);
        releases.close();
        assertTrue(releases.enqueue("late", record("late")));
        assertEquals(List.of("late"), released);
    }

    @Test
    void closeRunsWhatTheWorkersNeverReachedOnTheCaller() {
        // no abandoned thread allowed: the worker hangs in "stuck" and what is behind it waits in the queue
        ReleaseThread releases = start(16, 3, 0);
        releases.enqueue("stuck", hang("stuck"));
        releases.enqueue("queued-1", record("queued-1"));
        releases.enqueue("queued-2", record("queued-2"));
        String closer = Thread.currentThread().getName();
        List<String> threads = Collections.synchronizedList(new ArrayList<>());
        releases.enqueue("queued-3", () -> threads.add(Thread.currentThread().getName()));
        releases.close();
        assertEquals(List.of("queued-1", "queued-2"), released, "nothing queued is lost at shutdown");
        assertEquals(List.of(closer), threads);
        assertEquals(1, releases.pending(), "only the stuck one is still running");
    }
}
