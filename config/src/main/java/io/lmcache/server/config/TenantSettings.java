package io.lmcache.server.config;

/**
 * The tenant boundary (issue 45): a cache salt is a tenant's secret, and no tenant may hold the pool.
 *
 * @param readLockShare the largest share of the pool one tenant's read locks may hold, in (0, 1]
 *     ({@code --tenant-read-lock-share}); a LOOKUP that would pass it gets fewer hits
 * @param metricsClearSaltLabels label metrics with the cache salt itself rather than a keyed digest
 *     ({@code --metrics-clear-salt-labels}): for operators whose scrape is as private as the salts
 */
public record TenantSettings(double readLockShare, boolean metricsClearSaltLabels) {
    public static final double DEFAULT_READ_LOCK_SHARE = 0.5;
    public static final TenantSettings DEFAULTS = new TenantSettings(DEFAULT_READ_LOCK_SHARE, false);
}
