package io.lmcache.server.cuda;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * When the pool is pinned, host-only (a recording pinner stands in for cuMemHostRegister): nothing before the first GPU
 * registration, every prepared region after it, each exactly once, and a transfer's region pinned on the spot.
 */
class PinScheduleTest {
    private final Arena arena = Arena.ofConfined();
    private final List<Integer> pinnedRegions = new CopyOnWriteArrayList<>();
    private final PinSchedule.Pinner recorder = (region, slice) -> pinnedRegions.add(region);

    @AfterEach
    void close() {
        arena.close();
    }

    private MemorySegment slice() {
        return arena.allocate(4096);
    }

    @Test
    void nothingIsPinnedBeforeTheFirstRegistration() {
        PinSchedule schedule = new PinSchedule(4, 2);
        for (int region = 0; region < 4; region++) {
            schedule.prepared(region, slice());
        }
        assertEquals(PinSchedule.State.WAITING, schedule.state());
        assertEquals(0, schedule.pinnedRegions());
        assertTrue(pinnedRegions.isEmpty());
        CudaException refused = assertThrows(CudaException.class, () -> schedule.ensure(0));
        assertTrue(refused.getMessage().contains("no GPU worker has registered"), refused.getMessage());
        assertTrue(pinnedRegions.isEmpty());
    }

    @Test
    void theFirstRegistrationPinsEveryPreparedRegionOnceAndLaterOnesAsTheyArrive() {
        PinSchedule schedule = new PinSchedule(6, 3);
        for (int region = 0; region < 4; region++) {
            schedule.prepared(region, slice());
        }
        assertTrue(schedule.start(recorder));
        assertFalse(schedule.start((region, slice) -> { throw new AssertionError("a second pinner"); }));
        awaitDone(schedule);
        schedule.prepared(4, slice()); // prepared after the start: pinned by the thread that hands it over
        assertTrue(schedule.isPinned(4));
        assertFalse(schedule.isPinned(5));
        assertEquals(5, schedule.pinnedRegions());
        assertEquals(List.of(0, 1, 2, 3, 4), pinnedRegions.stream().sorted().toList());
        schedule.ensure(2); // pinned already: no second registration
        assertEquals(5, pinnedRegions.size());
        schedule.stop();
    }

    @Test
    void theHighestPreparedRegionIsPinnedAloneBeforeTheOthers() throws InterruptedException {
        PinSchedule schedule = new PinSchedule(8, 4);
        for (int region = 0; region < 5; region++) {
            schedule.prepared(region, slice());
        }
        CountDownLatch release = new CountDownLatch(1);
        List<Integer> calls = new CopyOnWriteArrayList<>();
        assertTrue(schedule.start((region, slice) -> {
            calls.add(region);
            if (calls.size() == 1) {
                try {
                    release.await(1, TimeUnit.MINUTES); // the first pin in progress
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            pinnedRegions.add(region);
        }));
        await().atMost(10, TimeUnit.SECONDS).until(() -> !calls.isEmpty());
        assertEquals(4, calls.getFirst(), "the allocator's first region (the highest prepared) first");
        Thread.sleep(200); // the other three sweep threads had their chance: none started a pin beside it
        assertEquals(List.of(4), calls, "no other region is pinned while the first one is");
        release.countDown();
        awaitDone(schedule);
        assertEquals(List.of(0, 1, 2, 3, 4), pinnedRegions.stream().sorted().toList());
        schedule.stop();
    }

    @Test
    void aTransferPinsTheRegionItMeetsAndAFailureSticks() {
        PinSchedule schedule = new PinSchedule(3, 1);
        schedule.prepared(0, slice());
        schedule.prepared(1, slice());
        assertTrue(schedule.start((region, slice) -> {
            if (region == 1) {
                throw new CudaException("cuMemHostRegister(region 1) failed: CUDA_ERROR_OUT_OF_MEMORY");
            }
            pinnedRegions.add(region);
        }));
        awaitDone(schedule);
        schedule.ensure(0);
        assertTrue(schedule.isPinned(0));
        CudaException failed = assertThrows(CudaException.class, () -> schedule.ensure(1));
        assertTrue(failed.getMessage().contains("could not be pinned"), failed.getMessage());
        assertTrue(schedule.error().contains("region 1"), schedule.error());
        CudaException unprepared = assertThrows(CudaException.class, () -> schedule.ensure(2));
        assertTrue(unprepared.getMessage().contains("not prepared"), unprepared.getMessage());
        assertEquals(List.of(0), pinnedRegions);
        schedule.stop();
    }

    @Test
    void awaitSweptSaysWhetherTheBackgroundPinningHasEnded() throws InterruptedException {
        PinSchedule schedule = new PinSchedule(4, 2);
        for (int region = 0; region < 4; region++) {
            schedule.prepared(region, slice());
        }
        assertFalse(schedule.awaitSwept(System.nanoTime() + TimeUnit.SECONDS.toNanos(1)), "no pinning before the first registration");
        CountDownLatch release = new CountDownLatch(1);
        assertTrue(schedule.start((region, slice) -> {
            try {
                release.await(1, TimeUnit.MINUTES); // every pin held until released
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            pinnedRegions.add(region);
        }));
        assertFalse(schedule.awaitSwept(System.nanoTime()), "a deadline already past: the sweeps are still pinning");
        assertFalse(schedule.awaitSwept(System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(50)), "still held at the deadline");
        assertEquals(PinSchedule.State.PINNING, schedule.state());
        release.countDown();
        assertTrue(schedule.awaitSwept(System.nanoTime() + TimeUnit.SECONDS.toNanos(30)));
        assertEquals(PinSchedule.State.DONE, schedule.state(), "awaitSwept returned only once every sweep had ended");
        assertEquals(List.of(0, 1, 2, 3), pinnedRegions.stream().sorted().toList());
        schedule.stop();
    }

    @Test
    void aStoppedScheduleNeverStarts() {
        PinSchedule schedule = new PinSchedule(2, 1);
        schedule.prepared(0, slice());
        schedule.stop();
        assertFalse(schedule.start(recorder));
        assertEquals(PinSchedule.State.WAITING, schedule.state());
        assertTrue(pinnedRegions.isEmpty());
    }

    private static void awaitDone(PinSchedule schedule) {
        await().atMost(10, TimeUnit.SECONDS).until(() -> schedule.state() == PinSchedule.State.DONE);
    }
}
