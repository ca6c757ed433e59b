/**
 * LMCache's HTTP KV bytes API (issue 49, fleet-and-operator-api.md §2.7): {@code /api/kv/store}, {@code /api/kv/retrieve} and
 * {@code /api/kv/lookup} over the L1 store, in a registered model's layout, in both revisions: raw v1 and the framed stream v1
 * ({@link io.lmcache.server.kvapi.KvFrames}). One Part of the assembly ({@code ServerParts.KV_BYTES}).
 */
package io.lmcache.server.kvapi;
