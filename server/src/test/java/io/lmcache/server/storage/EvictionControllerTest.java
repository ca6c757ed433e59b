package io.lmcache.server.storage;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.lmcache.server.config.EvictionPolicyName;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The controller as a housekeeping agent: a tick when one is due, and sweepers that fail alone. */
class EvictionControllerTest {
    private static final long MIB = 1L << 20;

    private static ObjectStore store() {
        SlabAllocator allocator = new SlabAllocator(4 * MIB, 4 * MIB);
        ObjectStore store = new ObjectStore(allocator, 4 * MIB, EvictionPolicyName.LRU, TimeUnit.SECONDS.toNanos(60), TimeUnit.SECONDS.toNanos(60),
                System::nanoTime, new StoreCounters());
        store.addReadyRegion(0);
        return store;
    }

    @Test
    void doWorkTicksAtOnceThenOnlyWhenTheNextTickIsDue() {
        ObjectStore store = store();
        EvictionController controller = new EvictionController(store, 0.8, 0.2, TimeUnit.HOURS.toNanos(1), List.of());
        assertEquals(1, controller.doWork());
        assertEquals(0, controller.doWork());
        assertEquals(0, controller.doWork());
        assertEquals(1, store.counters().evictionLoopTicks.sum());
    }

    @Test
    void aFailingSweeperSkipsNeitherTheOthersNorTheNextTick() {
        ObjectStore store = store();
        AtomicInteger swept = new AtomicInteger();
        EvictionController controller = new EvictionController(store, 0.8, 0.2, 0, List.of(() -> {
            throw new IllegalStateException("boom");
        }, swept::incrementAndGet));
        assertEquals(1, controller.doWork());
        assertEquals(1, controller.doWork());
        assertEquals(2, swept.get());
        assertEquals(2, store.counters().evictionFailures.sum());
    }
}
