package io.lmcache.server.module;

import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.tables.BoundedTable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.LongSupplier;

/**
 * The read locks a LOOKUP took, by request id: {@code num_kv_readers} per retained object (per
 * chunk, kv rank and, for hybrid models, object group; hybrid-and-l2.md §A.5).
 * RETRIEVE gives back one for its rank and chunks, FREE_LOOKUP_LOCKS what is left of a range,
 * END_SESSION everything; a lease older than the read TTL is dropped (the store reclaims the locks
 * on its own at the same TTL). Store calls happen outside this class's lock.
 *
 * <p>Bounded in count and bytes (request ids counted, a long one kept only as its digest; each lock's record and indices):
 * more than that means a client is not ending its sessions, and the oldest leases are released (counted in
 * {@code lmcache_mp_table_evictions_total{table="lookup_leases"}}; their chunks may then be evicted before their RETRIEVE).
 */
public final class LookupLeases {
    static final int MAX_LEASES = 1 << 18;
    static final long MAX_BYTES = 64L << 20;
    /** A lease's own cost, and each lock's: its record and its slots in the four arrays. */
    private static final long LEASE_BYTES = 96;
    private static final long LOCK_BYTES = 24 + 4 + 4 * 3 + 8;

    /** Lock {@code i} is on chunk {@code chunks[i]} of kv rank {@code ranks[i]}. */
    private static final class Lease {
        final ObjectStore.ReadLock[] locks;
        final int[] chunks;
        final int[] ranks;
        final int[] remaining;
        final long createdNs;

        Lease(ObjectStore.ReadLock[] locks, int[] chunks, int[] ranks, int readers, long createdNs) {
            this.locks = locks;
            this.chunks = chunks;
            this.ranks = ranks;
            this.remaining = new int[locks.length];
            Arrays.fill(remaining, readers);
            this.createdNs = createdNs;
        }
    }

    private record Release(ObjectStore.ReadLock lock, int count) {}

    private final ObjectStore store;
    private final long ttlNs;
    private final LongSupplier clockNs;
    private final BoundedTable<Lease> leases;

    public LookupLeases(ObjectStore store, long ttlNs, LongSupplier clockNs) {
        this(store, ttlNs, clockNs, MAX_LEASES, MAX_BYTES);
    }

    LookupLeases(ObjectStore store, long ttlNs, LongSupplier clockNs, int maxLeases, long maxBytes) {
        this.store = store;
        this.ttlNs = ttlNs;
        this.clockNs = clockNs;
        this.leases = new BoundedTable<>("lookup_leases", maxLeases, maxBytes);
    }

    /** The table, for its gauges. */
    public BoundedTable<?> table() {
        return leases;
    }

    /** Records the locks of a lookup of one object group (chunk-major from chunk 0, then rank), replacing an older lease of the same id. */
    public void put(String requestId, List<ObjectStore.ReadLock> locks, int worldSize, int readers) {
        int[] chunks = new int[locks.size()];
        int[] ranks = new int[locks.size()];
        for (int i = 0; i < chunks.length; i++) {
            chunks[i] = i / worldSize;
            ranks[i] = i % worldSize;
        }
        put(requestId, locks, chunks, ranks, readers);
    }

    /**
     * Records the locks of a lookup, lock {@code i} on chunk {@code chunks[i]} of rank {@code ranks[i]},
     * replacing (and releasing) an older lease of the same id.
     */
    public void put(String requestId, List<ObjectStore.ReadLock> locks, int[] chunks, int[] ranks, int readers) {
        List<Release> releases = new ArrayList<>();
        synchronized (this) {
            List<Lease> evicted = new ArrayList<>();
            Lease old = locks.isEmpty() ? leases.remove(requestId)
                    : leases.put(requestId, new Lease(locks.toArray(ObjectStore.ReadLock[]::new), chunks, ranks, readers, clockNs.getAsLong()),
                            LEASE_BYTES + LOCK_BYTES * locks.size(), evicted);
            if (old != null) {
                collectAll(old, releases);
            }
            evicted.forEach(lease -> collectAll(lease, releases));
        }
        apply(releases);
    }

    /**
     * One lock per retained object of {@code rank} on the chunks of {@code [fromChunk, toChunk)}: a
     * RETRIEVE (successful or not) of that range, which reads every object group's kept objects.
     */
    public void releaseRetrieved(String requestId, int rank, int fromChunk, int toChunk) {
        List<Release> releases = new ArrayList<>();
        synchronized (this) {
            Lease lease = leases.get(requestId);
            if (lease == null) {
                return;
            }
            for (int i = 0; i < lease.locks.length; i++) {
                if (lease.ranks[i] == rank && lease.chunks[i] >= fromChunk && lease.chunks[i] < toChunk && lease.remaining[i] > 0) {
                    lease.remaining[i]--;
                    releases.add(new Release(lease.locks[i], 1));
                }
            }
        }
        apply(releases);
    }

    /** Everything left on the chunks of {@code [fromChunk, toChunk)}, every rank: chunks vLLM will not retrieve. */
    public void free(String requestId, int fromChunk, int toChunk) {
        List<Release> releases = new ArrayList<>();
        synchronized (this) {
            Lease lease = leases.get(requestId);
            if (lease == null) {
                return;
            }
            for (int i = 0; i < lease.locks.length; i++) {
                if (lease.chunks[i] >= fromChunk && lease.chunks[i] < toChunk && lease.remaining[i] > 0) {
                    releases.add(new Release(lease.locks[i], lease.remaining[i]));
                    lease.remaining[i] = 0;
                }
            }
        }
        apply(releases);
    }

    /** The request is over: everything it still holds. */
    public void end(String requestId) {
        List<Release> releases = new ArrayList<>();
        synchronized (this) {
            Lease lease = leases.remove(requestId);
            if (lease != null) {
                collectAll(lease, releases);
            }
        }
        apply(releases);
    }

    /** Drops leases older than the read TTL. Runs on lmcache-housekeeping (an eviction-tick sweeper). */
    public int sweep() {
        List<Release> releases = new ArrayList<>();
        long nowNs = clockNs.getAsLong();
        int dropped = 0;
        synchronized (this) {
            List<Lease> expired = new ArrayList<>();
            // insertion order is age order: a put of a present id moves it to the young end with its new creation time
            dropped = leases.removeOldestWhile(lease -> nowNs - lease.createdNs - ttlNs > 0, expired);
            expired.forEach(lease -> collectAll(lease, releases));
        }
        apply(releases);
        return dropped;
    }

    public synchronized int size() {
        return leases.size();
    }

    private static void collectAll(Lease lease, List<Release> releases) {
        for (int i = 0; i < lease.locks.length; i++) {
            if (lease.remaining[i] > 0) {
                releases.add(new Release(lease.locks[i], lease.remaining[i]));
                lease.remaining[i] = 0;
            }
        }
    }

    private void apply(List<Release> releases) {
        // last chunk first: the head of a prefix becomes the most recently used
        for (int i = releases.size() - 1; i >= 0; i--) {
            store.releaseRead(releases.get(i).lock(), releases.get(i).count());
        }
    }
}
