package io.lmcache.server.storage;

import io.lmcache.server.config.ServerConfig;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The L1 tier assembled: the pool, its allocator and object store, and the eviction controller
 * (an agent the server runs on lmcache-housekeeping; this class starts no thread of its own).
 */
public final class L1Tier implements AutoCloseable {
    private static final long TICK_NS = TimeUnit.MILLISECONDS.toNanos(250);

    private final L1Pool pool;
    private final ObjectStore store;
    private final StoreCounters counters = new StoreCounters();
    /** {@code -Dlmcache.l1.prepareThreads} (0: chosen from the cores and the pages). */
    private final int prepareThreads;

    public L1Tier(ServerConfig config) {
        this(config, L1Pool.open(config.shmName(), config.l1SizeBytes(), config.l1RegionSizeBytes(), config.operator().shmMode()));
    }

    private L1Tier(ServerConfig config, L1Pool pool) {
        prepareThreads = config.tuning().prepareThreads();
        this.pool = pool;
        counters.lifecycle().sampleRate(config.operator().metricsSampleRate());
        SlabAllocator allocator = new SlabAllocator(pool.bytes(), pool.regionBytes());
        store = new ObjectStore(allocator, pool.bytes(), config.evictionPolicy(), config.l1WriteTtlNs(), config.l1ReadTtlNs(),
                System::nanoTime, counters);
        store.setReadLockShare(config.tenants().readLockShare());
    }

    /**
     * The tier over {@code pool} ({@link L1Pool#over}: the warm-up's scratch memory), every region ready at once: nothing is
     * prefaulted, pinned or placed, and no preparation thread starts.
     */
    public static L1Tier ready(ServerConfig config, L1Pool pool) {
        L1Tier tier = new L1Tier(config, pool);
        for (int region = 0; region < pool.regionCount(); region++) {
            tier.store.addReadyRegion(region);
        }
        return tier;
    }

    /** The eviction controller, whose ticks also run {@code sweepers}: an agent for the housekeeping thread to run. */
    public EvictionController evictionController(ServerConfig config, List<EvictionController.Sweeper> sweepers) {
        return new EvictionController(store, config.evictionTriggerWatermark(), config.evictionRatio(), TICK_NS, sweepers);
    }

    /** Starts preparing regions: prefault, then {@code stages} (pinning where there is a GPU). */
    public void startPreparation(List<L1Pool.RegionStage> stages) {
        startPreparation(stages, NumaPlacement.none("not asked"));
    }

    /** With each region placed on its NUMA node before its first touch ({@link NumaPlacement}). */
    public void startPreparation(List<L1Pool.RegionStage> stages, NumaPlacement numa) {
        // runs on: this thread without stages, else lmcache-pool-prepare (the store takes its own lock)
        pool.startPreparation(stages, store::addReadyRegion, numa, prepareThreads);
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
        pool.close();
    }
}
