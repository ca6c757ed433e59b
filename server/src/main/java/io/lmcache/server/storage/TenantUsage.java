package io.lmcache.server.storage;

/**
 * A tenant's line of {@code GET /quota} (IsolatedLRU): its cache salt ({@code _default} for the empty
 * one), its soft quota ({@code -1}: none), and the bytes and objects its published objects use.
 */
public record TenantUsage(String tenant, long quotaBytes, long usedBytes, int objects) {}
