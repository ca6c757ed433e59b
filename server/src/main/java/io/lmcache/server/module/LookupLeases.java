package io.lmcache.server.module;

import io.lmcache.server.storage.ObjectStore;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * The read locks a LOOKUP took, by request id: {@code num_kv_readers} per retained object (per
 * chunk, kv rank and, for hybrid models, object group; hybrid-and-l2.md §A.5).
 * RETRIEVE gives back one for its rank and chunks, FREE_LOOKUP_LOCKS what is left of a range,
 * END_SESSION everything; a lease older than the read TTL is dropped (the store reclaims the locks
 * on its own at the same TTL). Store calls happen outside this class's lock.
 */
public final class LookupLeases {
    /** More leases than this means a client is not ending its sessions: the oldest are released. */
    static final int MAX_LEASES = 1 << 20;

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
    private final Map<String, Lease> leases = new HashMap<>();

    public LookupLeases(ObjectStore store, long ttlNs, LongSupplier clockNs) {
        this.store = store;
        this.ttlNs = ttlNs;
        this.clockNs = clockNs;
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
            Lease old = locks.isEmpty() ? leases.remove(requestId)
                    : leases.put(requestId, new Lease(locks.toArray(ObjectStore.ReadLock[]::new), chunks, ranks, readers, clockNs.getAsLong()));
            if (old != null) {
                collectAll(old, releases);
            }
            if (leases.size() > MAX_LEASES) {
                dropOldest(releases);
            }
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
            for (Iterator<Lease> it = leases.values().iterator(); it.hasNext(); ) {
                Lease lease = it.next();
                if (nowNs - lease.createdNs - ttlNs > 0) {
                    it.remove();
                    collectAll(lease, releases);
                    dropped++;
                }
            }
        }
        apply(releases);
        return dropped;
    }

    public synchronized int size() {
        return leases.size();
    }

    private void dropOldest(List<Release> releases) {
        String oldestId = null;
        long oldestNs = Long.MAX_VALUE;
        for (Map.Entry<String, Lease> entry : leases.entrySet()) {
            if (entry.getValue().createdNs < oldestNs) {
                oldestNs = entry.getValue().createdNs;
                oldestId = entry.getKey();
            }
        }
        if (oldestId != null) {
            collectAll(leases.remove(oldestId), releases);
        }
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
