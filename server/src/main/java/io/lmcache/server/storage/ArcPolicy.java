package io.lmcache.server.storage;

import io.lmcache.server.config.EvictionPolicyName;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * Adaptive replacement (Megiddo and Modha; Caffeine's simulator {@code ArcPolicy} is the model), in
 * bytes: T1 holds objects seen once, T2 objects read again; B1 and B2 remember the keys recently
 * evicted from each (ghosts, keyed by {@link ObjectKey}, no memory). A new object whose key is a
 * ghost of B1 says T1 was too small: the target {@code p} for T1 grows; one from B2 shrinks it. The
 * victim is T1's tail while T1 holds more than {@code p}, else T2's, so a one-off scan passes
 * through T1 and leaves T2's hot set alone. Locked objects are off the lists but keep their home.
 * A background pass ({@link #bulkVictim}) frees a fifth of the pool at once: with {@code p} small it
 * would empty T1, taking chunks stored a moment ago before their first LOOKUP could read them. It
 * stops at a T1 object younger than {@link #YOUNG_FLOOR_NS} (never taking T2 in its place);
 * an on-demand eviction, which needs the room now, takes ARC's victim whatever its age.
 */
final class ArcPolicy implements EvictionPolicy {
    private static final int T1 = 1;
    private static final int T2 = 2;

    /** How long a new object is spared by background passes: a STORE's chunks are looked up by the next turn, seconds later. */
    static final long YOUNG_FLOOR_NS = TimeUnit.SECONDS.toNanos(10);

    private final long capacityBytes;
    private final LongSupplier clockNs;
    private long youngSpared;
    private final NodeList t1 = new NodeList("ARC T1");
    private final NodeList t2 = new NodeList("ARC T2");
    /** Resident bytes and objects by home (locked ones included): what {@code p} is compared with. */
    private final HomeTally homes = new HomeTally();
    private final GhostKeys b1 = new GhostKeys();
    private final GhostKeys b2 = new GhostKeys();
    private long p;
    private long ghostHits;
    /** What {@code /status} shows for this policy, by name. */
    private enum Gauge {
        P_BYTES, CAPACITY_BYTES, T1_OBJECTS, T1_BYTES, T2_OBJECTS, T2_BYTES, B1_GHOSTS, B1_BYTES, B2_GHOSTS, B2_BYTES, GHOST_HITS, YOUNG_SPARED
    }

    private final PolicyGauges<Gauge> gauges = new PolicyGauges<>(Gauge.class);

    ArcPolicy(long capacityBytes, LongSupplier clockNs) {
        this.capacityBytes = capacityBytes;
        this.clockNs = clockNs;
    }

    @Override
    public EvictionPolicyName name() {
        return EvictionPolicyName.ARC;
    }

    /** The target for T1's bytes (tests). */
    long targetT1Bytes() {
        return p;
    }

    @Override
    public void onReady(StoredObject object) {
        PolicyNode node = new PolicyNode(object);
        object.policySlot = node;
        long bytes = object.bytes;
        // the adaptation weighs the two ghost lists as they were before this key left one
        long b1Bytes = b1.bytes();
        long b2Bytes = b2.bytes();
        Long ghost = b1.remove(object.key);
        if (ghost != null) {
            // T1 was too small for this one to be read again
            p = Math.min(capacityBytes, p + bytes * Math.max(1, b2Bytes / b1Bytes));
        } else if ((ghost = b2.remove(object.key)) != null) {
            p = Math.max(0, p - bytes * Math.max(1, b1Bytes / b2Bytes));
        }
        if (ghost != null) {
            ghostHits++;
        }
        setHome(node, ghost != null ? T2 : T1);
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
            setHome(node, T2); // read again: frequent
        }
        (node.home == T1 ? t1 : t2).pushHead(node);
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
        NodeList from = victimList();
        return from == null ? null : take(from);
    }

    @Override
    public StoredObject bulkVictim() {
        NodeList from = victimList();
        if (from == t1 && clockNs.getAsLong() - t1.tail().object.createdNs < YOUNG_FLOOR_NS) {
            // the pass stops rather than take T2 instead: T2 is the hot set a scan through T1 must not cost
            youngSpared++;
            return null;
        }
        return from == null ? null : take(from);
    }

    /** ARC's choice: T1's tail while T1 holds more than {@code p} (or T2 is empty), else T2's; null when both are empty. */
    private NodeList victimList() {
        if (t1.size() > 0 && (homes.bytes(T1) > p || t2.size() == 0)) {
            return t1;
        }
        return t2.size() > 0 ? t2 : null;
    }

    private StoredObject take(NodeList from) {
        PolicyNode victim = from.tail();
        // it is freed now: it leaves T1 or T2, and its key becomes a ghost of that list
        setHome(victim, 0);
        (from == t1 ? b1 : b2).add(victim.object.key, victim.object.bytes);
        trimGhosts();
        return victim.object;
    }

    /** ARC's directory bounds: T1 and B1 together within the capacity, everything within twice it (B2 gives way). */
    private void trimGhosts() {
        b1.trimWhile(b1Bytes -> homes.bytes(T1) + b1Bytes > capacityBytes);
        b2.trimWhile(b2Bytes -> homes.bytes(T1) + homes.bytes(T2) + b1.bytes() + b2Bytes > 2 * capacityBytes);
    }

    @Override
    public boolean isEvictable(StoredObject object) {
        return PolicyNode.linked(object);
    }

    @Override
    public int evictableCount() {
        return t1.size() + t2.size();
    }

    @Override
    public void check() {
        t1.check();
        t2.check();
        if (t1.bytes() > homes.bytes(T1) || t2.bytes() > homes.bytes(T2) || t1.size() > homes.objects(T1) || t2.size() > homes.objects(T2)) {
            throw new IllegalStateException("ARC lists hold more than their resident counts: " + status());
        }
        if (p < 0 || p > capacityBytes || b1.bytes() + b2.bytes() > 2 * capacityBytes) {
            throw new IllegalStateException("ARC target or ghosts out of range: p " + p + ", ghosts " + (b1.bytes() + b2.bytes()));
        }
        b1.check("ARC B1");
        b2.check("ARC B2");
    }

    @Override
    public void publish() {
        gauges.set(Gauge.P_BYTES, p);
        gauges.set(Gauge.CAPACITY_BYTES, capacityBytes);
        gauges.set(Gauge.T1_OBJECTS, homes.objects(T1));
        gauges.set(Gauge.T1_BYTES, homes.bytes(T1));
        gauges.set(Gauge.T2_OBJECTS, homes.objects(T2));
        gauges.set(Gauge.T2_BYTES, homes.bytes(T2));
        gauges.set(Gauge.B1_GHOSTS, b1.size());
        gauges.set(Gauge.B1_BYTES, b1.bytes());
        gauges.set(Gauge.B2_GHOSTS, b2.size());
        gauges.set(Gauge.B2_BYTES, b2.bytes());
        gauges.set(Gauge.GHOST_HITS, ghostHits);
        gauges.set(Gauge.YOUNG_SPARED, youngSpared);
    }

    @Override
    public Map<String, Object> status() {
        return gauges.read(name().flagValue());
    }
}
