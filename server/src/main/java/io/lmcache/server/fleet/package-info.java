/**
 * Membership in an LMCache fleet (issue 49, fleet-and-operator-api.md §1): registration and heartbeats with LMCache's coordinator
 * ({@link io.lmcache.server.fleet.Membership}), the cache-event stream it builds its key directory from
 * ({@link io.lmcache.server.fleet.CacheEventStream}), and the cache control it calls on this server
 * ({@link io.lmcache.server.fleet.ObjectControl}). {@link io.lmcache.server.fleet.FleetPart} builds them; nothing here runs
 * without {@code --coordinator-url} but the event stream when {@code --trace-level events} records it
 * ({@link io.lmcache.server.fleet.BatchRecorder}), and nothing here ever stops the server from serving.
 */
package io.lmcache.server.fleet;
