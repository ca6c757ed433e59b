/**
 * Tables that outlive a request and are keyed by strings from the wire (request ids, session ids): bounded in entries and
 * bytes, never keyed by an unclipped wire string ({@link io.lmcache.server.tables.WireKey}), evictions counted. A leaf: it names
 * only the metrics catalogue.
 */
package io.lmcache.server.tables;
