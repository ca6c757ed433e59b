package io.lmcache.server.tier;

import io.lmcache.server.agent.Agent;
import io.lmcache.server.l2.AdapterUsage;
import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2AdapterSpec;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.l2.L2Lru;
import io.lmcache.server.metrics.L2Metrics;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Per-adapter L2 eviction (hybrid-and-l2.md §B.5), an agent on lmcache-housekeeping: every second,
 * each adapter with an LRU {@code "eviction"} block whose usage is at or above its trigger watermark
 * deletes its least recently used keys, {@code eviction_ratio} of its capacity's worth. The adapter
 * skips keys a prefetch has locked.
 */
public final class L2EvictionController implements Agent {
    private static final Logger LOG = LoggerFactory.getLogger(L2EvictionController.class);
    private static final long TICK_NS = TimeUnit.SECONDS.toNanos(1);

    /** One evicting adapter and the LRU order its listener events keep. */
    record Target(int index, L2Adapter adapter, L2Lru lru, L2AdapterSpec.EvictionSpec eviction) {}

    private final List<Target> targets;
    private final L2Metrics metrics;
    private long nextTickNs = System.nanoTime();

    L2EvictionController(List<Target> targets, L2Metrics metrics) {
        this.targets = List.copyOf(targets);
        this.metrics = metrics;
    }

    @Override
    public String roleName() {
        return "l2-eviction";
    }

    @Override
    public int doWork() {
        long nowNs = System.nanoTime();
        if (nowNs - nextTickNs < 0) {
            return 0;
        }
        nextTickNs = nowNs + TICK_NS;
        int removed = 0;
        for (Target target : targets) {
            removed += evict(target);
        }
        return 1 + removed;
    }

    /** One adapter's pass; returns the keys removed. */
    int evict(Target target) {
        AdapterUsage usage = target.adapter().usage();
        if (usage.totalCapacityBytes() <= 0 || usage.usageFraction() < target.eviction().triggerWatermark()) {
            return 0;
        }
        List<L2Key> victims = target.lru().victims((long) (target.eviction().evictionRatio() * usage.totalCapacityBytes()));
        List<L2Key> removed = target.adapter().delete(victims);
        Map<String, Integer> bySalt = new HashMap<>();
        removed.forEach(key -> bySalt.merge(key.salt(), 1, Integer::sum));
        bySalt.forEach(metrics.evictedObjects::add);
        LOG.info("L2 adapter #{} ({}) usage {}% is at or above the {}% watermark: evicted {} of {} least recently used object(s)",
                target.index(), target.adapter().typeName(), Math.round(usage.usageFraction() * 1000) / 10.0,
                Math.round(target.eviction().triggerWatermark() * 1000) / 10.0, removed.size(), victims.size());
        return removed.size();
    }
}
