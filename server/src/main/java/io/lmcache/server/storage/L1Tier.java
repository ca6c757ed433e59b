package io.lmcache.server.storage;

import io.lmcache.server.config.ServerConfig;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** The L1 tier assembled: the pool, its allocator and object store, and the eviction controller. */
public final class L1Tier implements AutoCloseable {
    private static final long TICK_NS = TimeUnit.MILLISECONDS.toNanos(250);

    private final L1Pool pool;
    private final ObjectStore store;
    private final StoreCounters counters = new StoreCounters();
    private EvictionController controller;

    public L1Tier(ServerConfig config) {
        pool = L1Pool.open(config.shmName(), config.l1SizeBytes(), config.l1RegionSizeBytes());
        SlabAllocator allocator = new SlabAllocator(pool.bytes(), pool.regionBytes());
        store = new ObjectStore(allocator, pool.bytes(), config.evictionPolicy(), config.l1WriteTtlNs(), config.l1ReadTtlNs(),
                System::nanoTime, counters);
    }

    /** Starts preparing regions (prefault, then {@code stages}) and the controller; {@code sweepers} ride on its ticks. */
    public void start(ServerConfig config, List<L1Pool.RegionStage> stages, List<EvictionController.Sweeper> sweepers) {
        pool.startPreparation(stages, store::addReadyRegion);
        controller = new EvictionController(store, config.evictionPolicy(), config.evictionTriggerWatermark(), config.evictionRatio(),
                TICK_NS, sweepers);
        controller.start();
    }

    public L1Pool pool() {
        return pool;
    }

    public ObjectStore store() {
        return store;
    }

    public StoreCounters counters() {
        return counters;
    }

    /** Stops preparing regions (before a pinning backend goes away). */
    public void stopPreparation() {
        pool.stopPreparation();
    }

    @Override
    public void close() {
        if (controller != null) {
            controller.close();
        }
        pool.close();
    }
}
