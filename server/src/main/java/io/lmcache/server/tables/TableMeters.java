package io.lmcache.server.tables;

import io.lmcache.server.metrics.ServerCatalogue;
import io.lmcache.server.metrics.ServerMetrics;

/** Binds a {@link BoundedTable}'s size, bytes and evictions to its series ({@link ServerCatalogue#TABLE_BYTES} and the others). */
public final class TableMeters {
    private TableMeters() {}

    public static void bind(ServerMetrics metrics, BoundedTable<?> table) {
        // runs on: lmcache-http-* (each scrape)
        metrics.gauge(ServerCatalogue.TABLE_BYTES, table::bytes, table.name());
        metrics.gauge(ServerCatalogue.TABLE_ENTRIES, table::size, table.name());
        metrics.functionCounter(ServerCatalogue.TABLE_EVICTIONS, table, BoundedTable::evictions, table.name());
    }
}
