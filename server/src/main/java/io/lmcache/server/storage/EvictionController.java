package io.lmcache.server.storage;

import io.lmcache.server.config.EvictionPolicy;
import io.lmcache.server.storage.StoreCounters.EvictionReason;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The background housekeeper of L1: each tick it reclaims expired locks (and whatever else is
 * registered as a sweeper) and, at or above the trigger watermark, evicts the least recently used
 * {@code ratio} of the pool. A failure is logged and counted and the next tick runs anyway: the
 * loop never dies (unlike LMCache #4817).
 */
public final class EvictionController implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(EvictionController.class);

    /** Periodic housekeeping that rides on this thread (lease and result expiry). */
    @FunctionalInterface
    public interface Sweeper {
        void sweep();
    }

    private final ObjectStore store;
    private final EvictionPolicy policy;
    private final double watermark;
    private final double ratio;
    private final long tickNs;
    private final List<Sweeper> sweepers;
    private final Thread thread;
    private volatile boolean running = true;

    public EvictionController(ObjectStore store, EvictionPolicy policy, double watermark, double ratio, long tickNs, List<Sweeper> sweepers) {
        this.store = store;
        this.policy = policy;
        this.watermark = watermark;
        this.ratio = ratio;
        this.tickNs = tickNs;
        this.sweepers = sweepers;
        this.thread = new Thread(this::run, "lmcache-l1-eviction");
        thread.setDaemon(true);
    }

    public void start() {
        thread.start();
    }

    private void run() {
        while (running) {
            tick();
            try {
                TimeUnit.NANOSECONDS.sleep(tickNs);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    /** One pass; returns the bytes evicted at the watermark. */
    public long tick() {
        StoreCounters counters = store.counters();
        counters.evictionLoopTicks.increment();
        long evicted = 0;
        try {
            store.sweepExpired();
            for (Sweeper sweeper : sweepers) {
                sweeper.sweep();
            }
            double usage = store.usageRatio();
            if (policy == EvictionPolicy.LRU && usage >= watermark) {
                counters.evictionLoopTriggered.increment();
                evicted = store.evict((long) (ratio * store.poolBytes()), EvictionReason.WATERMARK);
                LOG.info("L1 memory usage {}% is at or above the {}% watermark: evicted {} MiB, usage now {}%",
                        Math.round(usage * 1000) / 10.0, Math.round(watermark * 1000) / 10.0, evicted >> 20,
                        Math.round(store.usageRatio() * 1000) / 10.0);
            }
        } catch (Throwable t) {
            counters.evictionFailures.increment();
            LOG.error("L1 eviction pass failed; the controller keeps running", t);
        }
        return evicted;
    }

    @Override
    public void close() {
        running = false;
        thread.interrupt();
        try {
            thread.join(TimeUnit.SECONDS.toMillis(5));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
