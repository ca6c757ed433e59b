package io.lmcache.server.storage;

import io.lmcache.server.config.EvictionPolicyName;
import java.util.Map;
import java.util.function.IntFunction;
import java.util.function.LongSupplier;

/**
 * Which READY object goes next (Caffeine's split: the {@link ObjectTable} is the map and the memory,
 * the policy only the order). The store tells it of every published object ({@link #onReady}: it now
 * exists, still locked), of each time one stops or starts being a candidate ({@link #onLocked}: read
 * locked or pinned; {@link #onUnlocked}: evictable again, {@code touched} when it was read meanwhile)
 * and of its end ({@link #onFreed}, for any reason, at most once after its last other call); it asks
 * {@link #victim} for an evictable object to free, which the store then always frees. Everything runs
 * under the store's lock, except {@link #status}, which reads what {@link #publish} last wrote.
 * The policy keeps its per-object state in {@link StoredObject#policySlot}.
 */
sealed interface EvictionPolicy permits LruPolicy, ArcPolicy, S3FifoPolicy, TenantLruPolicy, NoopPolicy {
    /**
     * The policy {@code --eviction-policy} names, for a pool of {@code capacityBytes}; {@code saltOf} names an object's tenant
     * (the cache salt of its namespace id); {@code clockNs} is the store's clock (what {@link StoredObject#createdNs} was read from).
     */
    static EvictionPolicy create(EvictionPolicyName name, long capacityBytes, IntFunction<String> saltOf, LongSupplier clockNs) {
        return switch (name) {
            case LRU -> new LruPolicy();
            case ARC -> new ArcPolicy(capacityBytes, clockNs);
            case S3FIFO -> new S3FifoPolicy(capacityBytes);
            case ISOLATED_LRU -> new TenantLruPolicy(saltOf, capacityBytes);
            case NOOP -> new NoopPolicy();
        };
    }

    EvictionPolicyName name();

    /** {@code object} was published (READY); it is locked until {@link #onUnlocked}. */
    void onReady(StoredObject object);

    /** {@code object} is read-locked or pinned: not a victim. Idempotent. */
    void onLocked(StoredObject object);

    /** {@code object} (READY, not a candidate) is evictable again; {@code touched}: it was read since it last was. */
    void onUnlocked(StoredObject object, boolean touched);

    /** {@code object} leaves the store (evicted, cleared, replaced, doomed); nothing if the policy never saw it. Idempotent. */
    void onFreed(StoredObject object);

    /** An evictable object the store is to free now, or null when there is none (or the policy never evicts). */
    StoredObject victim();

    /**
     * The on-demand evictions until the next call make room for a STORE under {@code salt} (null: that STORE is placed), so a
     * policy of tenants can make a tenant at its quota pay for its own STORE.
     */
    default void storing(String salt) {}

    /**
     * The victim of a background (watermark) pass, which frees a share of the pool ahead of need: {@link #victim} unless the
     * policy would rather stop the pass than take it (the store's on-demand evictions always take {@link #victim}).
     */
    default StoredObject bulkVictim() {
        return victim();
    }

    /** Whether {@code object} is a candidate now. */
    boolean isEvictable(StoredObject object);

    /** Objects that are candidates now. */
    int evictableCount();

    /** The policy's own invariant (audit): throws when its lists, counts or ghosts disagree. */
    void check();

    /** Lock held: makes the numbers {@link #status} shows current (at the end of every change, so O(1)). */
    void publish();

    /** What {@code /status} shows of the policy; without the lock, from the last {@link #publish}. */
    Map<String, Object> status();
}
