package io.lmcache.server.config;

/** `--eviction-policy`: LRU by bytes, or noop (never evict; stores fail when the pool is full). */
public enum EvictionPolicy {
    LRU("LRU"),
    NOOP("noop");

    private final String flagValue;

    EvictionPolicy(String flagValue) {
        this.flagValue = flagValue;
    }

    public String flagValue() {
        return flagValue;
    }

    static EvictionPolicy parse(String text) {
        for (EvictionPolicy policy : values()) {
            if (policy.flagValue.equalsIgnoreCase(text)) {
                return policy;
            }
        }
        throw new IllegalArgumentException("must be one of LRU, noop");
    }
}
