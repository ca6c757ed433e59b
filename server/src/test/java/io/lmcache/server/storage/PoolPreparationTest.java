package io.lmcache.server.storage;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** Several threads prepare the pool's regions: each exactly once, each handed over after its last stage, the first failure stops all. */
class PoolPreparationTest {
    private static final long REGION = 64 << 10;

    private record Recorder(Set<Integer> staged, Set<String> threads, int failAt, long delayMs) implements L1Pool.RegionStage {
        @Override
        public String name() {
            return "record";
        }

        @Override
        public void prepare(int region, MemorySegment slice) throws InterruptedException {
            Thread.sleep(delayMs);
            if (region == failAt) {
                throw new IllegalStateException("pinning failed");
            }
            assertEquals(0, slice.get(ValueLayout.JAVA_BYTE, 0), "prefaulted (zero) before the stage");
            assertTrue(staged.add(region), "region " + region + " staged once");
            threads.add(Thread.currentThread().getName());
        }
    }

    @Test
    void everyRegionIsPreparedOnceAndHandedOverAfterItsStages() {
        try (Arena arena = Arena.ofShared()) {
            int regions = 40;
            MemorySegment pool = arena.allocate(regions * REGION, 4096);
            Recorder stage = new Recorder(ConcurrentHashMap.newKeySet(), ConcurrentHashMap.newKeySet(), -1, 0);
            Set<Integer> ready = ConcurrentHashMap.newKeySet();
            AtomicInteger readyBeforeStaged = new AtomicInteger();
            PoolPreparation preparation = new PoolPreparation(r -> pool.asSlice(r * REGION, REGION), regions, regions * REGION, REGION,
                    List.of(stage), r -> {
                        if (!stage.staged().contains(r)) {
                            readyBeforeStaged.incrementAndGet();
                        }
                        ready.add(r);
                    }, new PoolPreparation.Plan(3, false));
            preparation.start();
            await().atMost(Duration.ofSeconds(10)).until(() -> preparation.prepared() == regions);
            preparation.stop();
            assertEquals(regions, ready.size());
            assertEquals(regions, stage.staged().size());
            assertEquals(0, readyBeforeStaged.get());
            assertTrue(stage.threads().stream().allMatch(name -> name.startsWith("lmcache-pool-prepare-")), stage.threads().toString());
            assertEquals("", preparation.error());
        }
    }

    @Test
    void theFirstFailureStopsEveryThreadAndIsReported() {
        try (Arena arena = Arena.ofShared()) {
            int regions = 400;
            MemorySegment pool = arena.allocate(regions * REGION, 4096);
            Recorder stage = new Recorder(ConcurrentHashMap.newKeySet(), ConcurrentHashMap.newKeySet(), 5, 2);
            Set<Integer> ready = ConcurrentHashMap.newKeySet();
            PoolPreparation preparation = new PoolPreparation(r -> pool.asSlice(r * REGION, REGION), regions, regions * REGION, REGION,
                    List.of(stage), ready::add, new PoolPreparation.Plan(3, false));
            preparation.start();
            await().atMost(Duration.ofSeconds(10)).until(() -> !preparation.error().isEmpty());
            preparation.stop();
            assertTrue(preparation.error().startsWith("region 5: "), preparation.error());
            assertTrue(!ready.contains(5), "the failed region is never handed over");
            assertEquals(ready.size(), preparation.prepared());
            // the others stop after the regions in hand (2 ms each here): far fewer than all were prepared
            assertTrue(preparation.prepared() < regions - 3, "prepared " + preparation.prepared());
        }
    }

    @Test
    void hugePagesGetEveryCoreUpToSixteenAndSmallPagesHalfUpToEight() {
        assertEquals(16, PoolPreparation.threads(16, true, 0));
        assertEquals(16, PoolPreparation.threads(64, true, 0));
        assertEquals(2, PoolPreparation.threads(2, true, 0));
        assertEquals(8, PoolPreparation.threads(16, false, 0));
        assertEquals(8, PoolPreparation.threads(64, false, 0));
        assertEquals(1, PoolPreparation.threads(1, false, 0));
        assertEquals(3, PoolPreparation.threads(64, true, 3), "-Dlmcache.l1.prepareThreads wins");
    }

    @Test
    void theProgressLinesEstimateTheTimeLeftAtTheRateSoFar() {
        assertEquals(9, PoolPreparation.etaSeconds(1, 10, TimeUnit.SECONDS.toNanos(1)), "a tenth in 1 s: nine tenths left");
        assertEquals(1, PoolPreparation.etaSeconds(9, 10, TimeUnit.MILLISECONDS.toNanos(900)), "100 ms left rounds up");
        assertEquals(0, PoolPreparation.etaSeconds(10, 10, TimeUnit.SECONDS.toNanos(5)), "done");
        assertEquals(0, PoolPreparation.etaSeconds(0, 10, 0), "nothing done yet: no estimate");
    }
}
