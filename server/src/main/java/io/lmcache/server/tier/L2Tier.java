package io.lmcache.server.tier;

import io.lmcache.server.agent.AgentErrors;
import io.lmcache.server.agent.AgentRunner;
import io.lmcache.server.agent.CloseHelper;
import io.lmcache.server.agent.CompositeAgent;
import io.lmcache.server.agent.IdleStrategy;
import io.lmcache.server.agent.NamedThreads;
import io.lmcache.server.config.L2Settings;
import io.lmcache.server.config.StartupException;
import io.lmcache.server.l2.CompletionSignals;
import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2AdapterListener;
import io.lmcache.server.l2.L2AdapterSpec;
import io.lmcache.server.l2.L2Adapters;
import io.lmcache.server.l2.L2Lru;
import io.lmcache.server.metrics.L2Metrics;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.module.L2Prefetcher;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.tier.admission.L2WriteGate;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The L2 tier assembled (hybrid-and-l2.md §B.1): the adapters in {@code --l2-adapter} order, the
 * store and prefetch controllers (agents sharing the lmcache-l2 thread, woken by the adapters'
 * completion signals) and the L2 eviction agent for the housekeeping thread. Without adapters it
 * is inert: no thread, no hooks, {@code num_l2_adapters} 0.
 */
public final class L2Tier implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(L2Tier.class);
    public static final String THREAD = "lmcache-l2";
    /** The adapters' signals wake the thread; this bounds a wake-up that was somehow missed. */
    private static final long MAX_PARK_NS = TimeUnit.MILLISECONDS.toNanos(50);
    private static final long CLOSE_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(5);

    private final List<L2Adapter> adapters;
    private final ObjectStore store;
    private final StoreController storeController;
    private final PrefetchController prefetchController;
    /** The LOOKUP path's prefetcher: {@link #prefetchController}, behind {@link L1HitAdmission} under a frequency admission. */
    private final L2Prefetcher lookupPrefetcher;
    private final L2EvictionController eviction;
    private final WarmPrefetches warm;
    private final AgentRunner runner;

    /** The loads from L2: LOOKUP's controller, its admission-wrapped hand-over, and the coordinator's warm prefetches. */
    private record Loads(PrefetchController controller, L2Prefetcher lookup, WarmPrefetches warm) {}

    private L2Tier(List<L2Adapter> adapters, ObjectStore store, StoreController storeController, Loads loads, L2EvictionController eviction,
            AgentRunner runner) {
        this.adapters = adapters;
        this.store = store;
        this.storeController = storeController;
        this.prefetchController = loads.controller();
        this.lookupPrefetcher = loads.lookup();
        this.eviction = eviction;
        this.warm = loads.warm();
        this.runner = runner;
    }

    /**
     * Opens the adapters and builds the controllers; throws {@link StartupException} (one line, exit 2) when an adapter's storage
     * cannot be opened. {@code layouts}: the registered layouts' object shapes, and which models' LOOKUPs load from L2.
     */
    public static L2Tier open(L2Settings settings, L1Side l1, int chunkSize, ModelLayouts layouts, ServerMetrics serverMetrics,
            AgentErrors errors) {
        ObjectStore store = l1.store();
        MemorySegment pool = l1.pool();
        ObjectShapes shapes = layouts.shapes();
        if (!settings.enabled()) {
            return new L2Tier(List.of(), store, null, new Loads(null, null, null), null, null);
        }
        List<L2Adapter> adapters = openAdapters(settings.adapters());
        L2Metrics metrics = new L2Metrics(serverMetrics);
        List<L2EvictionController.Target> targets = new ArrayList<>();
        for (int i = 0; i < adapters.size(); i++) {
            L2Adapter adapter = adapters.get(i);
            // runs on: lmcache-http-* (each scrape)
            metrics.adapter(serverMetrics, i, settings.adapters().get(i).type(), () -> adapter.usage().totalBytesUsed());
            // runs on: lmcache-http-* (each scrape); the adapter keeps the counts (a Redis node's breaker opening, a value refused)
            metrics.adapterEvents(serverMetrics, i, settings.adapters().get(i).type(), adapter::eventCounts);
            L2AdapterSpec.EvictionSpec evictionSpec = settings.adapters().get(i).eviction();
            if (evictionSpec != null && evictionSpec.lru()) {
                L2Lru lru = new L2Lru();
                adapter.registerListener(lru);
                targets.add(new L2EvictionController.Target(i, adapter, lru, evictionSpec));
            }
        }
        AgentRunner[] runner = new AgentRunner[1];
        // runs on: whichever thread completes an L2 task or commits an L1 object; unparks lmcache-l2
        Runnable wake = () -> runner[0].wake();
        // --l2-admission and the write budgets: the sketch tells apart 4x the objects of 256 KiB the pool holds, at least 64 Ki (L2
        // holds more than L1, and a sketch too small for the objects in play admits one-hit wonders by collision), at most 4 Mi
        L2WriteGate gate = new L2WriteGate(settings.admission(), (int) Math.min(1 << 22, Math.max(1 << 16, store.poolBytes() >> 16)),
                metrics, System::nanoTime);
        // the write-through backlog holds L1 objects against eviction: a quarter of the pool at most
        StoreController storeController = new StoreController(adapters, l1, settings.skipL1(), layouts,
                new StoreController.Admission(gate, store.poolBytes() / 4), metrics, wake);
        storeController.fullAttentionOnly(settings.fullAttentionOnly());
        PrefetchContext prefetchContext = new PrefetchContext(adapters, store, pool, chunkSize, PrefixFold.LEADING_RUN,
                settings.retainPrefetched(), metrics);
        List<L2Lru> lrus = targets.stream().map(L2EvictionController.Target::lru).toList();
        // touch runs on: a LOOKUP's thread (the covered prefix of lmcache.hint.engine_computed_tokens); each LRU is synchronized
        PrefetchController prefetchController = new PrefetchController(prefetchContext, shapes, settings.prefetchMaxInFlight(), wake,
                System::nanoTime, settings.prefetchLoadTimeoutNs(), keys -> lrus.forEach(lru -> lru.onKeysAccessed(keys)));
        WarmPrefetches warm = new WarmPrefetches(prefetchContext, shapes, wake, System::nanoTime);
        runner[0] = new AgentRunner(THREAD, new CompositeAgent("l2-controllers", errors, List.of(storeController, prefetchController, warm)),
                IdleStrategy.backoff(MAX_PARK_NS), errors, CLOSE_TIMEOUT_NS);
        adapters.forEach(adapter -> adapter.setCompletionSignals(CompletionSignals.all(wake)));
        store.listen(storeController);
        LOG.info("L2 tier: {} adapter(s) {}, store policy {}, prefetch policy {}, at most {} prefetches in flight, admission {}, "
                + "write budget {} B/s per tenant", adapters.size(), settings.adapters().stream().map(L2AdapterSpec::type).toList(),
                settings.storePolicy(), settings.retainPrefetched() ? "retain" : "default", settings.prefetchMaxInFlight(),
                settings.admission().flagValue(), settings.admission().writeBudgetBytesPerSecond());
        return new L2Tier(adapters, store, storeController, new Loads(prefetchController, L1HitAdmission.wrap(prefetchController, gate, store,
                storeController), warm), targets.isEmpty() ? null : new L2EvictionController(targets, metrics), runner[0]);
    }

    private static List<L2Adapter> openAdapters(List<L2AdapterSpec> specs) {
        List<L2Adapter> adapters = new ArrayList<>();
        for (int i = 0; i < specs.size(); i++) {
            try {
                adapters.add(L2Adapters.create(specs.get(i), NamedThreads.factory("lmcache-l2-" + specs.get(i).type() + "-" + i)));
            } catch (IOException | RuntimeException e) {
                CloseHelper.closeAll(adapters.reversed());
                throw new StartupException("--l2-adapter #" + i, "cannot open " + specs.get(i).type() + ": " + e.getMessage());
            }
        }
        return adapters;
    }

    /** Adds {@code listener} to every adapter (the KV-event log's STORAGE feed). */
    public void registerListener(L2AdapterListener listener) {
        adapters.forEach(adapter -> adapter.registerListener(listener));
    }

    /** The adapters, in {@code --l2-adapter} order (the first is LMCache's primary); empty without L2. */
    public List<L2Adapter> adapters() {
        return adapters;
    }

    /** The LOOKUP hand-over, or null without L2. */
    public L2Prefetcher prefetcher() {
        return lookupPrefetcher;
    }

    /** The coordinator's warm prefetches ({@code POST /cache/prefetches}), or null without L2. */
    public WarmPrefetches warmPrefetches() {
        return warm;
    }

    /** The write-through, whose {@link StoreController#flush} a window commit uses; null without L2. */
    public StoreController storeController() {
        return storeController;
    }

    /** The L2 eviction agent for lmcache-housekeeping, or null when no adapter evicts. */
    public L2EvictionController evictionAgent() {
        return eviction;
    }

    public void start() {
        if (runner != null) {
            runner.start();
        }
    }

    /** {@code storage_manager}'s L2 fields: {@code num_l2_adapters}, {@code l2_adapters} (each adapter's status), the controllers. */
    public void putStatus(Map<String, Object> storage) {
        storage.put("num_l2_adapters", adapters.size());
        List<Map<String, Object>> statuses = new ArrayList<>();
        for (L2Adapter adapter : adapters) {
            statuses.add(adapter.status());
        }
        storage.put("l2_adapters", statuses);
        if (storeController != null) {
            storage.put("store_controller", storeController.status());
            storage.put("prefetch_controller", prefetchController.status());
            storage.put("warm_prefetch", warm.status());
        }
    }

    /** Stops feeding and running the controllers, then closes the adapters (each waits, bounded, for its I/O in flight). */
    @Override
    public void close() {
        if (runner == null) {
            return;
        }
        store.unlisten(storeController);
        runner.close();
        CloseHelper.closeAll(adapters.reversed());
    }
}
