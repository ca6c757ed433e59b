package io.lmcache.server.metrics;

/**
 * One meter of a catalogue: every catalogue is an enum in this package implementing this, listed in {@link Catalogues#ALL},
 * and every meter of the server is made from an entry (so every metric name is written once, here).
 */
public interface CatalogueEntry {
    MeterSpec spec();
}
