package io.lmcache.server.storage;

import io.lmcache.server.config.EvictionPolicyName;
import java.util.Map;

/**
 * Never evicts (LMCache's noop, for buffer-only use with {@code --l2-store-policy skip_l1}): a full
 * pool fails the next STORE. It still knows which objects are evictable, for status and the audit.
 */
final class NoopPolicy implements EvictionPolicy {
    /** The slot of an evictable object; null otherwise. */
    private static final Object EVICTABLE = new Object();

    private int evictable;
    /** What {@code /status} shows for this policy, by name. */
    private enum Gauge { EVICTABLE_OBJECTS }

    private final PolicyGauges<Gauge> gauges = new PolicyGauges<>(Gauge.class);

    @Override
    public EvictionPolicyName name() {
        return EvictionPolicyName.NOOP;
    }

    @Override
    public void onReady(StoredObject object) {
        object.policySlot = null;
    }

    @Override
    public void onLocked(StoredObject object) {
        if (object.policySlot == EVICTABLE) {
            object.policySlot = null;
            evictable--;
        }
    }

    @Override
    public void onUnlocked(StoredObject object, boolean touched) {
        if (object.policySlot != EVICTABLE) {
            object.policySlot = EVICTABLE;
            evictable++;
        }
    }

    @Override
    public void onFreed(StoredObject object) {
        onLocked(object);
    }

    @Override
    public StoredObject victim() {
        return null;
    }

    @Override
    public boolean isEvictable(StoredObject object) {
        return object.policySlot == EVICTABLE;
    }

    @Override
    public int evictableCount() {
        return evictable;
    }

    @Override
    public void check() {
        if (evictable < 0) {
            throw new IllegalStateException("noop policy counts " + evictable + " evictable objects");
        }
    }

    @Override
    public void publish() {
        gauges.set(Gauge.EVICTABLE_OBJECTS, evictable);
    }

    @Override
    public Map<String, Object> status() {
        return gauges.read(name().flagValue());
    }
}
