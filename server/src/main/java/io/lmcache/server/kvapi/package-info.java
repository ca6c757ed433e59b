/**
 * LMCache's HTTP KV bytes API (issue 49, fleet-and-operator-api.md §2.7, raw v1): {@code /api/kv/store}, {@code /api/kv/retrieve}
 * and {@code /api/kv/lookup} over the L1 store, in a registered model's layout. One Part once the assembly of issue 46 lands.
 */
package io.lmcache.server.kvapi;
