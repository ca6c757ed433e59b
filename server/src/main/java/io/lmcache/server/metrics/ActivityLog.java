package io.lmcache.server.metrics;

import io.lmcache.server.protocol.Op;
import io.lmcache.server.storage.ObjectStore;
import java.util.concurrent.TimeUnit;
import java.util.function.IntSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One INFO line every interval while the server is busy: stores/s, retrieves/s, copy GB/s, L1
 * usage, lookup hit rate and tracked workers. Silent when nothing happened.
 */
public final class ActivityLog implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(ActivityLog.class);

    private final ServerMetrics metrics;
    private final ObjectStore store;
    private final IntSupplier trackedWorkers;
    private final long intervalNs;
    private final Thread thread;
    private volatile boolean running = true;
    private long stores;
    private long retrieves;
    private long lookups;
    private long bytes;
    private long requestedTokens;
    private long hitTokens;

    public ActivityLog(ServerMetrics metrics, ObjectStore store, IntSupplier trackedWorkers, long intervalNs) {
        this.metrics = metrics;
        this.store = store;
        this.trackedWorkers = trackedWorkers;
        this.intervalNs = intervalNs;
        this.thread = new Thread(this::run, "lmcache-activity-log");
        thread.setDaemon(true);
    }

    public void start() {
        thread.start();
    }

    private void run() {
        while (running) {
            try {
                TimeUnit.NANOSECONDS.sleep(intervalNs);
            } catch (InterruptedException e) {
                return;
            }
            report();
        }
    }

    /** Logs the interval's line if anything happened; returns it (or null). */
    public String report() {
        long nowStores = metrics.requests(Op.STORE) + metrics.requests(Op.PREPARE_STORE);
        long nowRetrieves = metrics.requests(Op.RETRIEVE) + metrics.requests(Op.PREPARE_RETRIEVE);
        long nowLookups = metrics.requests(Op.LOOKUP);
        long nowBytes = metrics.storeBytes() + metrics.retrieveBytes();
        long nowRequested = metrics.lookupRequestedTokens();
        long nowHits = metrics.lookupHitTokens();
        long dStores = nowStores - stores;
        long dRetrieves = nowRetrieves - retrieves;
        long dLookups = nowLookups - lookups;
        long dBytes = nowBytes - bytes;
        long dRequested = nowRequested - requestedTokens;
        long dHits = nowHits - hitTokens;
        stores = nowStores;
        retrieves = nowRetrieves;
        lookups = nowLookups;
        bytes = nowBytes;
        requestedTokens = nowRequested;
        hitTokens = nowHits;
        if (dStores <= 0 && dRetrieves <= 0 && dLookups <= 0) {
            return null;
        }
        double seconds = intervalNs / 1e9;
        String line = String.format(java.util.Locale.ROOT,
                "activity: %.1f stores/s, %.1f retrieves/s, %.2f GB/s copied, L1 %.1f%% used, lookup hit rate %.1f%%, %d tracked worker(s)",
                dStores / seconds, dRetrieves / seconds, dBytes / seconds / 1e9, 100 * store.usageRatio(),
                dRequested == 0 ? 0.0 : 100.0 * dHits / dRequested, trackedWorkers.getAsInt());
        LOG.info(line);
        return line;
    }

    @Override
    public void close() {
        running = false;
        thread.interrupt();
    }
}
