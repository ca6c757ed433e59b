package io.lmcache.server.metrics;

import static io.lmcache.server.metrics.MeterSpec.counter;
import static io.lmcache.server.metrics.MeterSpec.gauge;

/** The KV-event channel's series (kv-events.md section 9): the log's depth, records by kind, losses, and the streams. */
public enum KvEventCatalogue implements CatalogueEntry {
    LOG_DEPTH(gauge("lmcache_mp.kv_events.log_depth", "KV-event records the log retains")),
    SUBSCRIBERS(gauge("lmcache_mp.kv_events.subscribers", "open subscribe_kv_events streams")),
    RECORDS(counter("lmcache_mp.kv_events.records", "KV-event records appended, by kind", "kind")),
    LOST_MARKERS(counter("lmcache_mp.kv_events.lost_markers", "loss markers appended: records dropped before reaching the log")),
    UNBOUND_STORES(counter("lmcache_mp.kv_events.unbound_stores",
            "stores not announced: no STORE bound the chunk to its tokens (L2 writes of such chunks, engine-driven COMMIT_STOREs)")),
    SUBSCRIPTIONS(counter("lmcache_mp.kv_events.subscriptions", "subscribe_kv_events streams opened")),
    BATCHES(counter("lmcache_mp.kv_events.batches", "KV-event batches sent on streams")),
    BATCHES_DROPPED(counter("lmcache_mp.kv_events.batches_dropped",
            "KV-event stream batches that did not reach their peer (reply budget, peer not reading): not counted as sent, sent again")),
    SUBSCRIPTIONS_ENDED(counter("lmcache_mp.kv_events.subscriptions_ended", "subscribe_kv_events streams ended, by reason", "reason"));

    private final MeterSpec spec;

    KvEventCatalogue(MeterSpec spec) {
        this.spec = spec;
    }

    @Override
    public MeterSpec spec() {
        return spec;
    }
}
