package io.lmcache.server.storage;

import io.lmcache.server.agent.Agent;
import io.lmcache.server.storage.StoreCounters.EvictionReason;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The L1 housekeeper, an agent on lmcache-housekeeping: every {@code tickNs} it reclaims expired
 * locks (and runs the registered sweepers) and, at or above the trigger watermark, evicts
 * {@code ratio} of the pool, the policy's victims (never under noop). A failure is logged and counted and the next tick
 * runs anyway (unlike LMCache #4817). The sweepers stay inside the tick rather than being agents
 * of their own: they share its cadence and its failure counter, which metrics already export.
 */
public final class EvictionController implements Agent {
    private static final Logger LOG = LoggerFactory.getLogger(EvictionController.class);

    /** Periodic housekeeping that rides on the tick (lease and result expiry). */
    @FunctionalInterface
    public interface Sweeper {
        void sweep();
    }

    private final ObjectStore store;
    private final double watermark;
    private final double ratio;
    private final long tickNs;
    private final List<Sweeper> sweepers;
    private long nextTickNs = System.nanoTime();

    public EvictionController(ObjectStore store, double watermark, double ratio, long tickNs, List<Sweeper> sweepers) {
        this.store = store;
        this.watermark = watermark;
        this.ratio = ratio;
        this.tickNs = tickNs;
        this.sweepers = List.copyOf(sweepers);
    }

    @Override
    public String roleName() {
        return "l1-eviction";
    }

    /** Ticks when the tick is due (the first at once); 1 when it ticked. */
    @Override
    public int doWork() {
        long nowNs = System.nanoTime();
        if (nowNs - nextTickNs < 0) {
            return 0;
        }
        tick();
        nextTickNs = nowNs + tickNs;
        return 1;
    }

    /** One pass; returns the bytes evicted at the watermark. */
    public long tick() {
        StoreCounters counters = store.counters();
        counters.evictionLoopTicks.increment();
        long evicted = 0;
        try {
            store.sweepExpired();
        } catch (Throwable t) {
            failed(counters, "expiry sweep", t);
        }
        // each sweeper on its own: one that throws neither skips the others nor the eviction
        for (Sweeper sweeper : sweepers) {
            try {
                sweeper.sweep();
            } catch (Throwable t) {
                failed(counters, "sweeper", t);
            }
        }
        try {
            double usage = store.usageRatio();
            if (store.evicts() && usage >= watermark) {
                counters.evictionLoopTriggered.increment();
                evicted = store.evict((long) (ratio * store.poolBytes()), EvictionReason.WATERMARK);
                LOG.info("L1 memory usage {}% is at or above the {}% watermark: evicted {} MiB, usage now {}%",
                        Math.round(usage * 1000) / 10.0, Math.round(watermark * 1000) / 10.0, evicted >> 20,
                        Math.round(store.usageRatio() * 1000) / 10.0);
            }
        } catch (Throwable t) {
            failed(counters, "eviction", t);
        }
        return evicted;
    }

    private static void failed(StoreCounters counters, String what, Throwable t) {
        counters.evictionFailures.increment();
        LOG.error("L1 {} failed; the controller keeps running", what, t);
    }
}
