package io.lmcache.server.loop;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.metrics.LivenessCatalogue;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.peer.PeerId;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The transfer lanes' stall watch: a request past its time is counted and offered to the deadline once while it runs, a new one again. */
class LaneStallWatchTest {
    private static final Runnable NOTHING = () -> { };
    private final ServerMetrics metrics = new ServerMetrics();
    private final List<KeyedSerialExecutor.Running<PeerId>> running = new ArrayList<>();
    private final long[] askedSince = new long[1];
    private final List<KeyedSerialExecutor.Running<PeerId>> answered = new ArrayList<>();
    private final LaneStallWatch watch = new LaneStallWatch(since -> {
        askedSince[0] = since;
        return running.stream().filter(task -> task.startedNs() - since <= 0).toList();
    }, answered::add, metrics, 1_000_000, 0);

    private long stalls() {
        return metrics.declare(LivenessCatalogue.TRANSFER_LANE_STALLS).sum();
    }

    @Test
    void aRequestPastItsTimeIsCountedOnceWhileItRunsAndANewOneAgain() throws Exception {
        assertEquals(0, watch.doWork());
        assertEquals(0, stalls(), "declared at 0");
        PeerId peer = new PeerId(new byte[] {1, 2});
        running.add(new KeyedSerialExecutor.Running<>(peer, Thread.currentThread(), System.nanoTime() + 60_000_000_000L, NOTHING));
        assertEquals(0, watch.doWork(), "a request younger than the stall time is not one");
        running.set(0, new KeyedSerialExecutor.Running<>(peer, Thread.currentThread(), System.nanoTime() - 5_000_000, NOTHING));
        assertEquals(1, watch.doWork());
        assertEquals(0, watch.doWork(), "the same request, still running: not counted again");
        assertEquals(1, stalls());
        assertTrue(System.nanoTime() - askedSince[0] >= 1_000_000, "asks for the requests older than the stall time");
        running.set(0, new KeyedSerialExecutor.Running<>(peer, Thread.currentThread(), System.nanoTime() - 5_000_000, NOTHING));
        assertEquals(1, watch.doWork(), "the lane's next stalled request");
        assertEquals(2, stalls());
        running.clear();
        assertEquals(0, watch.doWork());
        assertEquals(2, stalls());
        assertEquals(2, answered.size(), "each stalled request is offered to the deadline's answer once");
        assertTrue(answered.get(0) != answered.get(1));
    }

    @Test
    void theStackIsTheThreadsInnermostFramesFirstAndBounded() throws Exception {
        CountDownLatch deep = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        Thread waiting = new Thread(() -> descend(LaneStallWatch.MAX_FRAMES + 10, deep, release), "stall-watch-test");
        waiting.start();
        try {
            assertTrue(deep.await(10, TimeUnit.SECONDS));
            // past its countDown and parked in the await: the frames are then the ones a stalled lane shows
            await().atMost(Duration.ofSeconds(10)).until(() -> waiting.getState() == Thread.State.WAITING);
            String stack = LaneStallWatch.stack(waiting);
            String[] frames = stack.split(" <- ");
            assertEquals(LaneStallWatch.MAX_FRAMES + 1, frames.length, stack);
            assertTrue(frames[0].contains("CountDownLatch.await") || frames[0].contains("Unsafe.park"), "innermost first: " + stack);
            assertTrue(stack.contains("descend"), stack);
            assertTrue(frames[frames.length - 1].endsWith(" more"), stack);
        } finally {
            release.countDown();
            waiting.join(10_000);
        }
    }

    private static void descend(int depth, CountDownLatch deep, CountDownLatch release) {
        if (depth > 0) {
            descend(depth - 1, deep, release);
            return;
        }
        deep.countDown();
        try {
            release.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
