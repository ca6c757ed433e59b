package io.lmcache.server.storage;

import io.lmcache.server.config.EvictionPolicyName;
import java.util.Map;

/**
 * S3-FIFO (Yang et al., SOSP 2023), in bytes: new objects enter a small FIFO (a tenth of the pool),
 * the rest of the pool is the main FIFO, and a ghost FIFO remembers keys evicted from the small one.
 * An object read while in the small queue moves to main when it reaches the tail, one never read
 * leaves at once (a one-off scan stays in the small queue); main reinserts a read object at its head
 * (a read count of at most 3, one spent per pass, CLOCK-like) and evicts one not read since. A new
 * object whose key is a ghost goes straight to main. Amortised O(1): each reinsertion spends a read.
 * Locked objects are off the queues and go back to their queue's head when unlocked.
 */
final class S3FifoPolicy implements EvictionPolicy {
    private static final int SMALL = 1;
    private static final int MAIN = 2;
    private static final int MAX_FREQ = 3;

    private final long smallTargetBytes;
    private final long ghostCapacityBytes;
    private final NodeList small = new NodeList("S3FIFO small");
    private final NodeList main = new NodeList("S3FIFO main");
    /** Resident bytes by home, locked objects included. */
    private final HomeTally homes = new HomeTally();
    private final GhostKeys ghost = new GhostKeys();
    private long promoted;
    private long ghostHits;
    /** What {@code /status} shows for this policy, by name. */
    private enum Gauge { SMALL_TARGET_BYTES, SMALL_EVICTABLE, SMALL_BYTES, MAIN_EVICTABLE, MAIN_BYTES, GHOST_KEYS, GHOST_BYTES, PROMOTED_TO_MAIN, GHOST_HITS }

    private final PolicyGauges<Gauge> gauges = new PolicyGauges<>(Gauge.class);

    S3FifoPolicy(long capacityBytes) {
        this.smallTargetBytes = capacityBytes / 10;
        this.ghostCapacityBytes = capacityBytes - smallTargetBytes;
    }

    @Override
    public EvictionPolicyName name() {
        return EvictionPolicyName.S3FIFO;
    }

    @Override
    public void onReady(StoredObject object) {
        PolicyNode node = new PolicyNode(object);
        object.policySlot = node;
        Long remembered = ghost.remove(object.key);
        if (remembered != null) {
            ghostHits++;
        }
        setHome(node, remembered != null ? MAIN : SMALL);
    }

    private void setHome(PolicyNode node, int home) {
        homes.move(node, home);
    }

    @Override
    public void onLocked(StoredObject object) {
        PolicyNode node = PolicyNode.of(object);
        if (node != null && node.linked()) {
            node.list.remove(node);
        }
    }

    @Override
    public void onUnlocked(StoredObject object, boolean touched) {
        PolicyNode node = PolicyNode.of(object);
        if (touched) {
            node.freq = Math.min(MAX_FREQ, node.freq + 1);
        }
        (node.home == SMALL ? small : main).pushHead(node);
    }

    @Override
    public void onFreed(StoredObject object) {
        PolicyNode node = PolicyNode.release(object, this::onLocked);
        if (node != null) {
            setHome(node, 0);
        }
    }

    @Override
    public StoredObject victim() {
        while (small.size() > 0 || main.size() > 0) {
            if (small.size() > 0 && (homes.bytes(SMALL) >= smallTargetBytes || main.size() == 0)) {
                PolicyNode tail = small.tail();
                if (tail.freq == 0) {
                    remember(tail.object);
                    return tail.object;
                }
                small.remove(tail);
                tail.freq = 0;
                setHome(tail, MAIN);
                main.pushHead(tail);
                promoted++;
            } else {
                PolicyNode tail = main.tail();
                if (tail.freq == 0) {
                    return tail.object;
                }
                tail.freq--;
                main.remove(tail);
                main.pushHead(tail);
            }
        }
        return null;
    }

    /** A key evicted from the small queue: if it comes back soon, it goes to main. */
    private void remember(StoredObject object) {
        ghost.add(object.key, object.bytes);
        ghost.trimWhile(bytes -> bytes > ghostCapacityBytes);
    }

    @Override
    public boolean isEvictable(StoredObject object) {
        return PolicyNode.linked(object);
    }

    @Override
    public int evictableCount() {
        return small.size() + main.size();
    }

    @Override
    public void check() {
        small.check();
        main.check();
        if (small.bytes() > homes.bytes(SMALL) || main.bytes() > homes.bytes(MAIN)) {
            throw new IllegalStateException("S3FIFO queues hold more than their resident bytes: " + status());
        }
        ghost.check("S3FIFO");
        if (ghost.bytes() > ghostCapacityBytes) {
            throw new IllegalStateException("S3FIFO ghost bytes " + ghost.bytes() + " over their capacity " + ghostCapacityBytes);
        }
    }

    @Override
    public void publish() {
        gauges.set(Gauge.SMALL_TARGET_BYTES, smallTargetBytes);
        gauges.set(Gauge.SMALL_EVICTABLE, small.size());
        gauges.set(Gauge.SMALL_BYTES, homes.bytes(SMALL));
        gauges.set(Gauge.MAIN_EVICTABLE, main.size());
        gauges.set(Gauge.MAIN_BYTES, homes.bytes(MAIN));
        gauges.set(Gauge.GHOST_KEYS, ghost.size());
        gauges.set(Gauge.GHOST_BYTES, ghost.bytes());
        gauges.set(Gauge.PROMOTED_TO_MAIN, promoted);
        gauges.set(Gauge.GHOST_HITS, ghostHits);
    }

    @Override
    public Map<String, Object> status() {
        return gauges.read(name().flagValue());
    }
}
