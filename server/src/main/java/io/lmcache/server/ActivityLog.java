package io.lmcache.server;

import io.lmcache.server.agent.Agent;
import io.lmcache.server.loop.RequestMeters;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.storage.ObjectStore;
import java.util.Locale;
import java.util.function.IntSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One INFO line every interval while the server is busy: stores/s, retrieves/s, copy GB/s, L1
 * usage, lookup hit rate and tracked workers. Silent when nothing happened. An agent on
 * lmcache-housekeeping; it only reads counters, so any thread may call {@link #report()} in tests. A log line, not a
 * metric: it lives with the composition root, which has every part it reads.
 */
public final class ActivityLog implements Agent {
    private static final Logger LOG = LoggerFactory.getLogger(ActivityLog.class);

    private final ServerMetrics metrics;
    private final RequestMeters requests;
    private final ObjectStore store;
    private final IntSupplier trackedWorkers;
    private final long intervalNs;
    private long nextReportNs;
    private long stores;
    private long retrieves;
    private long lookups;
    private long bytes;
    private long requestedTokens;
    private long hitTokens;

    public ActivityLog(ServerMetrics metrics, RequestMeters requests, ObjectStore store, IntSupplier trackedWorkers, long intervalNs) {
        this.metrics = metrics;
        this.requests = requests;
        this.store = store;
        this.trackedWorkers = trackedWorkers;
        this.intervalNs = intervalNs;
        this.nextReportNs = System.nanoTime() + intervalNs;
    }

    @Override
    public String roleName() {
        return "activity-log";
    }

    @Override
    public void onStart() {
        nextReportNs = System.nanoTime() + intervalNs;
    }

    /** Reports once an interval has passed; 1 when it did. */
    @Override
    public int doWork() {
        long nowNs = System.nanoTime();
        if (nowNs - nextReportNs < 0) {
            return 0;
        }
        nextReportNs = nowNs + intervalNs;
        report();
        return 1;
    }

    /** Logs the interval's line if anything happened; returns it (or null). */
    public String report() {
        long nowStores = requests.requests(Op.STORE) + requests.requests(Op.PREPARE_STORE);
        long nowRetrieves = requests.requests(Op.RETRIEVE) + requests.requests(Op.PREPARE_RETRIEVE);
        long nowLookups = requests.requests(Op.LOOKUP);
        long nowBytes = metrics.storeBytes() + metrics.retrieveBytes();
        long nowRequested = metrics.lookups().requestedTokens();
        long nowHits = metrics.lookups().hitTokens();
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
        String line = String.format(Locale.ROOT,
                "activity: %.1f stores/s, %.1f retrieves/s, %.2f GB/s copied, L1 %.1f%% used, lookup hit rate %.1f%%, %d tracked worker(s)",
                dStores / seconds, dRetrieves / seconds, dBytes / seconds / 1e9, 100 * store.usageRatio(),
                dRequested == 0 ? 0.0 : 100.0 * dHits / dRequested, trackedWorkers.getAsInt());
        LOG.info(line);
        return line;
    }
}
