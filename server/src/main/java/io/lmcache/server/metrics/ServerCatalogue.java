package io.lmcache.server.metrics;

import static io.lmcache.server.metrics.MeterSpec.counter;
import static io.lmcache.server.metrics.MeterSpec.gauge;

/** The server's own series: log lines, folded label values, failed agent turns, refused HTTP mutations, the build. */
public enum ServerCatalogue implements CatalogueEntry {
    LOG_LINES(counter("lmcache_mp.log_lines", "lines written to the log, by level", "level")),
    LOG_SUPPRESSED_LINES(counter("lmcache_mp.log_suppressed_lines", "log lines a rate limit held back")),
    LABEL_VALUES_FOLDED(counter("lmcache_mp.metric_label_values_folded",
            "series updates whose label value was counted under _other: the label had " + LabelValues.LIMIT
            + " distinct values already", "label")),
    AGENT_ERRORS(counter("lmcache_mp.agent_errors", "failed turns of a background agent (it keeps running), by role", "role")),
    HTTP_REFUSED(counter("lmcache_mp.http_refused", "admin HTTP requests (mutations, /quota) refused, by reason", "reason")),
    KV_API_REFUSED(counter("lmcache_mp.kv_api_refused",
            "HTTP KV bytes API requests (raw and framed stream) refused after the admin guard, by HTTP status", "status")),
    TABLE_BYTES(gauge("lmcache_mp.table_bytes",
            "estimated heap bytes of a table that outlives requests (lookup results, leases, sessions), keys included, by table", "table")),
    TABLE_ENTRIES(gauge("lmcache_mp.table_entries", "entries of a table that outlives requests, by table", "table")),
    TABLE_EVICTIONS(counter("lmcache_mp.table_evictions",
            "entries a table that outlives requests dropped, oldest first, at its entry or byte cap, by table", "table")),
    BUILD_INFO(gauge("lmcache_mp.build_info", "The build of this server", "version", "commit", "java_version"));

    private final MeterSpec spec;

    ServerCatalogue(MeterSpec spec) {
        this.spec = spec;
    }

    @Override
    public MeterSpec spec() {
        return spec;
    }
}
