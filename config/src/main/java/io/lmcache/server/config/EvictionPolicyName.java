package io.lmcache.server.config;

/**
 * {@code --eviction-policy}, in LMCache's spelling: which of the object store's eviction policies runs
 * ({@code storage.EvictionPolicyName}). LRU by bytes (the default), ARC, S3FIFO, IsolatedLRU (per cache_salt
 * soft quotas set through {@code /quota}: a tenant over its quota is evicted first, and eviction never
 * stops), or noop (never evict; stores fail when the pool is full).
 */
public enum EvictionPolicyName {
    LRU("LRU"),
    ARC("ARC"),
    S3FIFO("S3FIFO"),
    ISOLATED_LRU("IsolatedLRU"),
    NOOP("noop");

    private final String flagValue;

    EvictionPolicyName(String flagValue) {
        this.flagValue = flagValue;
    }

    public String flagValue() {
        return flagValue;
    }

    static EvictionPolicyName parse(String text) {
        for (EvictionPolicyName policy : values()) {
            if (policy.flagValue.equalsIgnoreCase(text)) {
                return policy;
            }
        }
        throw new IllegalArgumentException("must be one of LRU, ARC, S3FIFO, IsolatedLRU, noop");
    }
}
