package io.lmcache.server.loop;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Per-key lanes on a shared pool: FIFO and never overlapping within a key, parallel across keys, a
 * failing task does not strand its lane, idle lanes are dropped, and a shut-down pool rejects.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class KeyedSerialExecutorTest {
    private static final Duration BOUND = Duration.ofSeconds(10);

    private final ExecutorService pool = Executors.newFixedThreadPool(4);
    private final KeyedSerialExecutor<String> lanes = new KeyedSerialExecutor<>(pool);

    @AfterEach
    void stop() throws InterruptedException {
        pool.shutdownNow();
        pool.awaitTermination(10, TimeUnit.SECONDS);
    }

    @Test
    void tasksOfOneKeyRunInSubmissionOrderAndNeverOverlap() throws Exception {
        int perKey = 2_000;
        List<String> keys = List.of("a", "b", "c");
        Map<String, List<Integer>> ran = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> running = new ConcurrentHashMap<>();
        AtomicInteger overlaps = new AtomicInteger();
        CountDownLatch done = new CountDownLatch(perKey * keys.size());
        for (String key : keys) {
            ran.put(key, Collections.synchronizedList(new ArrayList<>()));
            running.put(key, new AtomicInteger());
        }
        for (int i = 0; i < perKey; i++) {
            for (String key : keys) {
                int sequence = i;
                // runs on: a pool thread, one of this key's lane at a time
                lanes.execute(key, () -> {
                    if (running.get(key).incrementAndGet() != 1) {
                        overlaps.incrementAndGet();
                    }
                    ran.get(key).add(sequence);
                    running.get(key).decrementAndGet();
                    done.countDown();
                });
            }
        }
        assertTrue(done.await(BOUND.toSeconds(), TimeUnit.SECONDS), "every task ran");
        assertEquals(0, overlaps.get(), "two tasks of one key never ran at once");
        for (String key : keys) {
            List<Integer> order = ran.get(key);
            for (int i = 0; i < perKey; i++) {
                assertEquals(i, order.get(i), "key " + key + " ran in submission order");
            }
        }
    }

    @Test
    void differentKeysRunInParallel() throws Exception {
        CountDownLatch bothRunning = new CountDownLatch(2);
        CountDownLatch finished = new CountDownLatch(2);
        for (String key : List.of("worker-1", "worker-2")) {
            // runs on: a pool thread; each waits for the other, so serialising the keys would never finish
            lanes.execute(key, () -> {
                bothRunning.countDown();
                try {
                    if (bothRunning.await(BOUND.toSeconds(), TimeUnit.SECONDS)) {
                        finished.countDown();
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
        }
        assertTrue(finished.await(BOUND.toSeconds() * 2, TimeUnit.SECONDS), "two keys' tasks were running at the same time");
        await().atMost(BOUND).until(() -> lanes.activeLanes() == 0);
    }

    @Test
    void aThrowingTaskDoesNotStrandTheTasksBehindIt() throws Exception {
        CountDownLatch gate = new CountDownLatch(1);
        CountDownLatch after = new CountDownLatch(1);
        // runs on: a pool thread; holds the lane so both tasks below queue behind it
        lanes.execute("k", () -> awaitQuietly(gate));
        lanes.execute("k", () -> {
            throw new IllegalStateException("a handler that escaped its own error handling");
        });
        lanes.execute("k", after::countDown);
        gate.countDown();
        assertTrue(after.await(BOUND.toSeconds(), TimeUnit.SECONDS), "the task after the failing one still ran");
        await().atMost(BOUND).until(() -> lanes.activeLanes() == 0);
        CountDownLatch later = new CountDownLatch(1);
        lanes.execute("k", later::countDown);
        assertTrue(later.await(BOUND.toSeconds(), TimeUnit.SECONDS), "the key takes new work afterwards");
    }

    @Test
    void aLaneIsDroppedWhenItsKeyHasNoWork() throws Exception {
        CountDownLatch gate = new CountDownLatch(1);
        CountDownLatch done = new CountDownLatch(100);
        for (int i = 0; i < 100; i++) {
            String key = "peer-" + i;
            // runs on: a pool thread
            lanes.execute(key, () -> {
                awaitQuietly(gate);
                done.countDown();
            });
        }
        assertEquals(100, lanes.activeLanes(), "a lane per key with queued or running work");
        gate.countDown();
        assertTrue(done.await(BOUND.toSeconds(), TimeUnit.SECONDS));
        await().atMost(BOUND).until(() -> lanes.activeLanes() == 0);
    }

    @Test
    void aShutDownPoolRejectsNewKeysAndKeepsNoLaneForThem() {
        pool.shutdown();
        assertThrows(RejectedExecutionException.class, () -> lanes.execute("new", () -> {}));
        assertEquals(0, lanes.activeLanes(), "the rejected key left no lane behind");
        assertThrows(RejectedExecutionException.class, () -> lanes.execute("new", () -> {}), "and is rejected again, not queued");
    }

    @Test
    void aLaneAlreadyRunningDrainsWhatIsQueuedBehindItAfterShutdown() throws Exception {
        CountDownLatch gate = new CountDownLatch(1);
        CountDownLatch queued = new CountDownLatch(1);
        // runs on: a pool thread
        lanes.execute("busy", () -> awaitQuietly(gate));
        pool.shutdown();
        lanes.execute("busy", queued::countDown);
        gate.countDown();
        assertTrue(queued.await(BOUND.toSeconds(), TimeUnit.SECONDS), "the running lane ran the task queued behind it");
        assertTrue(pool.awaitTermination(BOUND.toSeconds(), TimeUnit.SECONDS));
        assertEquals(0, lanes.activeLanes());
    }

    @Test
    void aRunningTaskIsReportedWithItsThreadAndStartUntilItEnds() throws Exception {
        CountDownLatch gate = new CountDownLatch(1);
        CountDownLatch started = new CountDownLatch(1);
        Thread[] runner = new Thread[1];
        long beforeNs = System.nanoTime();
        // runs on: a pool thread
        lanes.execute("stuck", () -> {
            runner[0] = Thread.currentThread();
            started.countDown();
            awaitQuietly(gate);
        });
        lanes.execute("stuck", () -> {}); // queued behind it: not running, not reported
        assertTrue(started.await(BOUND.toSeconds(), TimeUnit.SECONDS));
        assertEquals(1, lanes.runningSince(System.nanoTime()).size(), "the running task, not the one queued behind it");
        KeyedSerialExecutor.Running<String> running = lanes.runningSince(System.nanoTime()).getFirst();
        assertEquals("stuck", running.key());
        assertEquals(runner[0], running.thread());
        assertTrue(running.startedNs() - beforeNs >= 0, "started after it was queued");
        assertEquals(List.of(), lanes.runningSince(beforeNs - 1), "nothing that started before it");
        gate.countDown();
        await().atMost(BOUND).until(() -> lanes.activeLanes() == 0);
        assertEquals(List.of(), lanes.runningSince(System.nanoTime()), "an idle lane reports nothing");
    }

    @Test
    void anAbandonedLaneGoesOnInOrderOnAFreshThreadAndItsThreadLeavesWhenItsTaskReturns() throws Exception {
        List<Integer> spare = Collections.synchronizedList(new ArrayList<>());
        ExecutorService single = Executors.newFixedThreadPool(2); // one for the stuck task, one for the fresh lane
        KeyedSerialExecutor<String> lanes = new KeyedSerialExecutor<>(single, spare::add);
        try {
            CountDownLatch gate = new CountDownLatch(1);
            CountDownLatch started = new CountDownLatch(1);
            List<Integer> ran = Collections.synchronizedList(new ArrayList<>());
            List<Thread> threads = Collections.synchronizedList(new ArrayList<>());
            // runs on: a pool thread, until the gate opens (a call that does not return)
            lanes.execute("peer", () -> {
                threads.add(Thread.currentThread());
                started.countDown();
                awaitQuietly(gate);
                ran.add(0);
            });
            CountDownLatch queuedMayEnd = new CountDownLatch(1);
            for (int i = 1; i <= 3; i++) {
                int sequence = i;
                // runs on: the fresh lane's thread once the first is abandoned
                lanes.execute("peer", () -> {
                    threads.add(Thread.currentThread());
                    ran.add(sequence);
                    if (sequence == 3) {
                        awaitQuietly(queuedMayEnd);
                    }
                });
            }
            assertTrue(started.await(BOUND.toSeconds(), TimeUnit.SECONDS));
            KeyedSerialExecutor.Running<String> stuck = lanes.runningSince(System.nanoTime()).getFirst();
            assertTrue(lanes.abandon(stuck));
            assertEquals(List.of(1), spare, "the pool is told it lent a thread");
            assertEquals(1, lanes.abandonedRunning());
            await().atMost(BOUND).until(() -> ran.size() == 3);
            assertEquals(List.of(1, 2, 3), ran, "the queued tasks ran in order while the first still ran");
            assertTrue(threads.get(1) != threads.get(0), "on another thread");
            assertTrue(lanes.runningSince(System.nanoTime()).contains(stuck), "the abandoned task is still reported while it runs");
            assertEquals(false, lanes.abandon(stuck), "abandoned once only");
            queuedMayEnd.countDown();
            lanes.execute("peer", () -> ran.add(4));
            await().atMost(BOUND).until(() -> ran.size() == 4);

            gate.countDown();
            await().atMost(BOUND).until(() -> lanes.abandonedRunning() == 0);
            assertEquals(List.of(1, 2, 3, 4, 0), ran, "the abandoned task's late end runs nothing of the lane's");
            assertEquals(List.of(1, -1), spare, "and gives the thread back");
            await().atMost(BOUND).until(() -> lanes.activeLanes() == 0);
            assertEquals(List.of(), lanes.runningSince(System.nanoTime()));
        } finally {
            single.shutdownNow();
        }
    }

    @Test
    void aTaskThatEndedIsNotAbandoned() throws Exception {
        CountDownLatch gate = new CountDownLatch(1);
        CountDownLatch started = new CountDownLatch(1);
        // runs on: a pool thread
        lanes.execute("k", () -> {
            started.countDown();
            awaitQuietly(gate);
        });
        assertTrue(started.await(BOUND.toSeconds(), TimeUnit.SECONDS));
        KeyedSerialExecutor.Running<String> running = lanes.runningSince(System.nanoTime()).getFirst();
        gate.countDown();
        await().atMost(BOUND).until(() -> lanes.activeLanes() == 0);
        assertEquals(false, lanes.abandon(running));
        assertEquals(0, lanes.abandonedRunning());
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
