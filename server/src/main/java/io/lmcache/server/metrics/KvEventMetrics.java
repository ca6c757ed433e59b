package io.lmcache.server.metrics;

import java.util.List;

/** The KV-event channel's series (kv-events.md §9): the log's depth, records by kind, losses, and the streams. */
public final class KvEventMetrics {
    private KvEventMetrics() {}

    /** What the series read, each O(1); implemented by the channel. */
    public interface Source {
        double records(String kind);

        double lostMarkers();

        double unboundStores();

        double logDepth();

        double subscribers();

        double subscriptionsOpened();

        double batchesSent();

        List<String> endReasons();

        double subscriptionsEnded(String reason);
    }

    // runs on: lmcache-http-* (each scrape), every function below
    public static void bind(ServerMetrics metrics, Source source) {
        metrics.gauge("lmcache_mp.kv_events.log_depth", "KV-event records the log retains", source::logDepth);
        metrics.gauge("lmcache_mp.kv_events.subscribers", "open subscribe_kv_events streams", source::subscribers);
        for (String kind : List.of("stored", "removed")) {
            metrics.functionCounter("lmcache_mp.kv_events.records", "KV-event records appended, by kind", source, s -> s.records(kind),
                    "kind", kind);
        }
        metrics.functionCounter("lmcache_mp.kv_events.lost_markers", "loss markers appended: records dropped before reaching the log",
                source, Source::lostMarkers);
        metrics.functionCounter("lmcache_mp.kv_events.unbound_stores",
                "stores not announced: no STORE bound the chunk to its tokens (L2 writes of such chunks, engine-driven COMMIT_STOREs)", source,
                Source::unboundStores);
        metrics.functionCounter("lmcache_mp.kv_events.subscriptions", "subscribe_kv_events streams opened", source,
                Source::subscriptionsOpened);
        metrics.functionCounter("lmcache_mp.kv_events.batches", "KV-event batches sent on streams", source, Source::batchesSent);
        for (String reason : source.endReasons()) {
            metrics.functionCounter("lmcache_mp.kv_events.subscriptions_ended", "subscribe_kv_events streams ended, by reason", source,
                    s -> s.subscriptionsEnded(reason), "reason", reason);
        }
    }
}
