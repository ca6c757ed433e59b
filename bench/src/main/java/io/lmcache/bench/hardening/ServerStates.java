package io.lmcache.bench.hardening;

/**
 * The server around a hardening run: its samples before and after, its heap after a full GC at the end, and whether it
 * still answered a fresh client.
 */
record ServerStates(ServerSample before, ServerSample after, double heapAfterGc, boolean answering) {}
