package io.lmcache.server.l2;

import java.util.List;

/** {@code fault_inject}: drops load results of {@code inner} by {@code rules}; everything else is its inner adapter's. */
public record FaultInjectSpec(L2AdapterSpec inner, FaultRules rules) implements L2AdapterSpec {
    @Override
    public String type() {
        return FaultInjectType.NAME;
    }

    @Override
    public EvictionSpec eviction() {
        return inner.eviction();
    }

    /** Its inner adapter's: logged once, as the adapter is built. */
    @Override
    public List<String> warnings() {
        return inner.warnings();
    }

    @Override
    public long maxCapacityBytes() {
        return inner.maxCapacityBytes();
    }

    @Override
    public boolean persistEnabled() {
        return inner.persistEnabled();
    }
}
