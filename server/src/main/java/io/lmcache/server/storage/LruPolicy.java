package io.lmcache.server.storage;

import io.lmcache.server.config.EvictionPolicyName;
import java.util.Map;

/**
 * Least recently used, by bytes (the default): every time an object becomes evictable (published,
 * or its last lock or pin released) it goes to the head, and the victim is the tail, in O(1). A
 * prefix is committed last chunk first, so its tail chunks go before its head.
 */
final class LruPolicy implements EvictionPolicy {
    private final NodeList lru = new NodeList("LRU");
    /** What {@code /status} shows for this policy, by name. */
    private enum Gauge { EVICTABLE_OBJECTS, EVICTABLE_BYTES }

    private final PolicyGauges<Gauge> gauges = new PolicyGauges<>(Gauge.class);

    @Override
    public EvictionPolicyName name() {
        return EvictionPolicyName.LRU;
    }

    @Override
    public void onReady(StoredObject object) {
        object.policySlot = new PolicyNode(object);
    }

    @Override
    public void onLocked(StoredObject object) {
        PolicyNode node = PolicyNode.of(object);
        if (node != null && node.linked()) {
            lru.remove(node);
        }
    }

    @Override
    public void onUnlocked(StoredObject object, boolean touched) {
        lru.pushHead(PolicyNode.of(object));
    }

    @Override
    public void onFreed(StoredObject object) {
        onLocked(object);
        object.policySlot = null;
    }

    @Override
    public StoredObject victim() {
        PolicyNode tail = lru.tail();
        return tail == null ? null : tail.object;
    }

    @Override
    public boolean isEvictable(StoredObject object) {
        return PolicyNode.linked(object);
    }

    @Override
    public int evictableCount() {
        return lru.size();
    }

    @Override
    public void check() {
        lru.check();
    }

    @Override
    public void publish() {
        gauges.set(Gauge.EVICTABLE_OBJECTS, lru.size());
        gauges.set(Gauge.EVICTABLE_BYTES, lru.bytes());
    }

    @Override
    public Map<String, Object> status() {
        return gauges.read(name().flagValue());
    }
}
