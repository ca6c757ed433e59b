package io.lmcache.server.metrics;

import static io.lmcache.server.metrics.MeterSpec.counter;
import static io.lmcache.server.metrics.MeterSpec.gauge;

/** Membership in an LMCache fleet (fleet-and-operator-api.md §1.3, §1.4.4): registrations, heartbeats, the cache-event stream. */
public enum FleetCatalogue implements CatalogueEntry {
    REGISTRATIONS(counter("lmcache_mp.coordinator.registrations", "successful registrations with the coordinator (first and again)")),
    HEARTBEATS(counter("lmcache_mp.coordinator.heartbeats", "heartbeats the coordinator acknowledged")),
    FAILURES(counter("lmcache_mp.coordinator.failures", "registrations and heartbeats that failed (retried next interval)")),
    FORGOTTEN(counter("lmcache_mp.coordinator.forgotten", "heartbeats answered 404: the coordinator forgot this server, which registers again")),
    EVENTS_DROPPED(counter("lmcache_mp.cache_events.events_dropped", "cache events lost before delivery, by reason", "reason")),
    PUBLISH_RETRIES(counter("lmcache_mp.cache_events.publish_retries", "POST /events attempts to be retried (transport error, 5xx, 408, 429)")),
    BATCHES_POSTED(counter("lmcache_mp.cache_events.batches_posted", "cache-event batches the coordinator accepted")),
    SPOOL_DEPTH(gauge("lmcache_mp.cache_events.spool_depth", "cache-event entries waiting for delivery")),
    WARM_PREFETCHES(counter("lmcache_mp.warm_prefetch.requests", "POST /cache/prefetches by outcome (submitted, noop, refused: "
            + "400/413/422/503, full: too many jobs held)", "outcome"));

    private final MeterSpec spec;

    FleetCatalogue(MeterSpec spec) {
        this.spec = spec;
    }

    @Override
    public MeterSpec spec() {
        return spec;
    }
}
