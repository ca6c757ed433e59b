package io.lmcache.server.storage;

import io.lmcache.server.config.EvictionPolicyName;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.IntFunction;

/**
 * LMCache's IsolatedLRU: one LRU list per tenant next to the global one, and soft quotas in bytes per
 * tenant. A tenant is a cache salt given a quota ({@code POST /quota}); every other salt, the empty one
 * included, is in one shared bucket, {@code _default}, so a peer that sends a fresh salt with every
 * STORE is still one tenant and cannot escape the quotas (nor leave a table entry per salt). The
 * bucket's quota is the one set for {@code _default}, else, once any salt has a quota, what the
 * quotas leave of the pool. A victim comes from the tenant furthest over its quota (its least
 * recently used object), else from the tenant of the STORE that needs the room if it is at its quota,
 * else from the global LRU, so a pool full of tenants under their quotas still
 * evicts (LMCache #4817 stopped the eviction thread instead). Soft: a tenant may exceed its quota
 * while the pool has room; a tenant with no quota is never over. Usage counts every published object
 * of the tenant, locked ones included; an object stays in the bucket it was stored in until it goes.
 * The tenants' numbers are read by {@code /quota} without the lock.
 */
final class TenantLruPolicy implements EvictionPolicy {
    /** The empty cache salt as {@code /quota} names it (LMCache's sentinel). */
    static final String DEFAULT_TENANT = "_default";
    static final long NO_QUOTA = -1;

    /** One tenant: written under the store's lock, read by {@code /quota} without it. */
    static final class Tenant {
        final String salt;
        final NodeList lru;
        volatile long usedBytes;
        volatile long quotaBytes = NO_QUOTA;
        volatile int objects;

        Tenant(String salt) {
            this.salt = salt;
            this.lru = new NodeList("tenant " + salt);
        }

        long overBytes() {
            return quotaBytes < 0 ? 0 : usedBytes - quotaBytes;
        }
    }

    private final IntFunction<String> saltOf;
    private final long capacityBytes;
    private final NodeList global = new NodeList("IsolatedLRU global");
    /** The salts given a quota (and those whose quota was removed while they still hold objects), then the shared bucket. */
    private final Map<String, Tenant> tenants = new ConcurrentHashMap<>();
    /** The empty salt's and every salt's without a quota of its own; always in {@link #tenants} under "". */
    private final Tenant shared = new Tenant("");
    /** The quota set for {@code _default} ({@link #NO_QUOTA}: none, the bucket gets what the others' quotas leave). */
    private long sharedQuotaSet = NO_QUOTA;
    /** The tenant the on-demand evictions under way make room for (see {@link #storing}), or null. */
    private Tenant storing;
    /** The sum of the quotas set for salts. */
    private long quotasSet;
    private final Set<Tenant> over = new LinkedHashSet<>();
    private long quotaEvictions;
    /** What {@code /status} shows for this policy, by name. */
    private enum Gauge { EVICTABLE_OBJECTS, TENANTS, TENANTS_OVER_QUOTA, QUOTA_EVICTIONS }

    private final PolicyGauges<Gauge> gauges = new PolicyGauges<>(Gauge.class);

    TenantLruPolicy(IntFunction<String> saltOf, long capacityBytes) {
        this.saltOf = saltOf;
        this.capacityBytes = capacityBytes;
        tenants.put("", shared);
    }

    @Override
    public EvictionPolicyName name() {
        return EvictionPolicyName.ISOLATED_LRU;
    }

    @Override
    public void onReady(StoredObject object) {
        Tenant own = tenants.get(saltOf.apply(object.key.namespace()));
        Tenant tenant = own != null && own.quotaBytes != NO_QUOTA ? own : shared;
        PolicyNode node = new PolicyNode(object);
        node.owner = tenant;
        node.twin = new PolicyNode(object);
        object.policySlot = node;
        tenant.usedBytes += object.bytes;
        tenant.objects++;
        reconsider(tenant);
    }

    @Override
    public void onLocked(StoredObject object) {
        PolicyNode node = PolicyNode.of(object);
        if (node != null && node.linked()) {
            global.remove(node);
            node.twin.list.remove(node.twin);
        }
    }

    @Override
    public void onUnlocked(StoredObject object, boolean touched) {
        PolicyNode node = PolicyNode.of(object);
        global.pushHead(node);
        ((Tenant) node.owner).lru.pushHead(node.twin);
    }

    @Override
    public void onFreed(StoredObject object) {
        PolicyNode node = PolicyNode.release(object, this::onLocked);
        if (node == null) {
            return;
        }
        Tenant tenant = (Tenant) node.owner;
        tenant.usedBytes -= object.bytes;
        tenant.objects--;
        reconsider(tenant);
        if (tenant != shared && tenant.objects == 0 && tenant.quotaBytes == NO_QUOTA) {
            tenants.remove(tenant.salt); // its quota was removed meanwhile: its last object is gone
        }
    }

    private void reconsider(Tenant tenant) {
        if (tenant.overBytes() > 0) {
            over.add(tenant);
        } else {
            over.remove(tenant);
        }
    }

    @Override
    public void storing(String salt) {
        if (salt == null) {
            storing = null;
        } else {
            Tenant own = tenants.get(salt);
            storing = own != null && own.quotaBytes != NO_QUOTA ? own : shared;
        }
    }

    @Override
    public StoredObject victim() {
        Tenant worst = null;
        for (Tenant tenant : over) {
            if (tenant.lru.size() > 0 && (worst == null || tenant.overBytes() > worst.overBytes())) {
                worst = tenant;
            }
        }
        if (worst == null && storing != null && storing.quotaBytes != NO_QUOTA && storing.usedBytes >= storing.quotaBytes
                && storing.lru.size() > 0) {
            // nobody is over, and the STORE's own tenant is at its quota: its STORE would put it over, so it pays
            worst = storing;
        }
        if (worst != null) {
            quotaEvictions++;
            return worst.lru.tail().object;
        }
        PolicyNode tail = global.tail();
        return tail == null ? null : tail.object;
    }

    /** Sets (or with {@link #NO_QUOTA} removes) a tenant's quota; lock held. */
    void setQuota(String tenantName, long quotaBytes) {
        String salt = DEFAULT_TENANT.equals(tenantName) ? "" : tenantName;
        if (salt.isEmpty()) {
            sharedQuotaSet = quotaBytes;
        } else {
            Tenant tenant = tenants.computeIfAbsent(salt, Tenant::new);
            quotasSet += Math.max(0, quotaBytes) - Math.max(0, tenant.quotaBytes);
            tenant.quotaBytes = quotaBytes;
            reconsider(tenant);
            if (tenant.objects == 0 && quotaBytes == NO_QUOTA) {
                tenants.remove(salt);
            }
        }
        shared.quotaBytes = sharedQuotaSet != NO_QUOTA ? sharedQuotaSet
                : quotasSet > 0 || tenants.size() > 1 ? Math.max(0, capacityBytes - quotasSet) : NO_QUOTA;
        reconsider(shared);
    }

    /** Every tenant with objects or a quota; without the lock (each number a value it really had). */
    List<TenantUsage> usage() {
        List<TenantUsage> out = new ArrayList<>();
        for (Tenant tenant : tenants.values()) {
            out.add(new TenantUsage(tenant.salt.isEmpty() ? DEFAULT_TENANT : tenant.salt, tenant.quotaBytes, tenant.usedBytes,
                    tenant.objects));
        }
        out.sort((a, b) -> a.tenant().compareTo(b.tenant()));
        return out;
    }

    @Override
    public boolean isEvictable(StoredObject object) {
        return PolicyNode.linked(object);
    }

    @Override
    public int evictableCount() {
        return global.size();
    }

    @Override
    public void check() {
        global.check();
        int perTenant = 0;
        for (Tenant tenant : tenants.values()) {
            tenant.lru.check();
            perTenant += tenant.lru.size();
            if ((tenant.overBytes() > 0) != over.contains(tenant) || tenant.usedBytes < tenant.lru.bytes() || tenant.objects < 0
                    || tenant != shared && tenant.quotaBytes == NO_QUOTA && tenant.objects == 0) {
                throw new IllegalStateException("tenant " + tenant.salt + " accounted wrong: used " + tenant.usedBytes + ", quota "
                        + tenant.quotaBytes + ", over " + over.contains(tenant));
            }
        }
        if (perTenant != global.size()) {
            throw new IllegalStateException("the tenants' lists hold " + perTenant + " objects, the global one " + global.size());
        }
    }

    @Override
    public void publish() {
        gauges.set(Gauge.EVICTABLE_OBJECTS, global.size());
        gauges.set(Gauge.TENANTS, tenants.size());
        gauges.set(Gauge.TENANTS_OVER_QUOTA, over.size());
        gauges.set(Gauge.QUOTA_EVICTIONS, quotaEvictions);
    }

    @Override
    public Map<String, Object> status() {
        return gauges.read(name().flagValue());
    }
}
