package io.lmcache.server.metrics;

import java.util.List;

/** The KV-event channel's series (kv-events.md §9): the log's depth, records by kind, losses, and the streams. */
public final class KvEventMetrics {
    private KvEventMetrics() {}

    /** What the series read, each O(1); implemented by the channel. */
    public interface Source {
        /** The record kinds' labels (the channel owns the vocabulary). */
        List<String> recordKinds();

        double records(String kind);

        double lostMarkers();

        double unboundStores();

        double logDepth();

        double subscribers();

        double subscriptionsOpened();

        double batchesSent();

        default double batchesDropped() {
            return 0;
        }

        List<String> endReasons();

        double subscriptionsEnded(String reason);
    }

    // runs on: lmcache-http-* (each scrape), every function below
    public static void bind(ServerMetrics metrics, Source source) {
        metrics.gauge(KvEventCatalogue.LOG_DEPTH, source::logDepth);
        metrics.gauge(KvEventCatalogue.SUBSCRIBERS, source::subscribers);
        for (String kind : source.recordKinds()) {
            metrics.functionCounter(KvEventCatalogue.RECORDS, source, s -> s.records(kind), kind);
        }
        metrics.functionCounter(KvEventCatalogue.LOST_MARKERS, source, Source::lostMarkers);
        metrics.functionCounter(KvEventCatalogue.UNBOUND_STORES, source, Source::unboundStores);
        metrics.functionCounter(KvEventCatalogue.SUBSCRIPTIONS, source, Source::subscriptionsOpened);
        metrics.functionCounter(KvEventCatalogue.BATCHES, source, Source::batchesSent);
        metrics.functionCounter(KvEventCatalogue.BATCHES_DROPPED, source, Source::batchesDropped);
        for (String reason : source.endReasons()) {
            metrics.functionCounter(KvEventCatalogue.SUBSCRIPTIONS_ENDED, source, s -> s.subscriptionsEnded(reason), reason);
        }
    }
}
