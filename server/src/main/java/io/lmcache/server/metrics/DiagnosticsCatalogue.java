package io.lmcache.server.metrics;

import static io.lmcache.server.metrics.MeterSpec.counter;

/** The operator diagnostics (fleet-and-operator-api.md §3.3, §3.4): the lookup-hash log and the events trace. */
public enum DiagnosticsCatalogue implements CatalogueEntry {
    LOOKUP_HASH_LINES(counter("lmcache_mp.lookup_hash_log.lines", "LOOKUPs written to the lookup-hash log (--lookup-hash-log-dir)")),
    LOOKUP_HASH_DROPPED(counter("lmcache_mp.lookup_hash_log.dropped",
            "LOOKUPs not written: the writer's queue was full (queue_full) or the file could not be written (write_error)", "reason")),
    LOOKUP_HASH_SALTED(counter("lmcache_mp.lookup_hash_log.salted_skipped",
            "salted LOOKUPs left out of the lookup-hash log (a line has no salt, so a tenant's chunks would read as everyone's)")),
    TRACE_RECORDS(counter("lmcache_mp.trace.records", "records written to the events trace (--trace-level events)")),
    TRACE_DROPPED(counter("lmcache_mp.trace.dropped",
            "trace records not written: the file reached its size cap (size_cap) or a write failed (write_error)", "reason"));

    private final MeterSpec spec;

    DiagnosticsCatalogue(MeterSpec spec) {
        this.spec = spec;
    }

    @Override
    public MeterSpec spec() {
        return spec;
    }
}
