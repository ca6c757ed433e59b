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
 * The read locks a LOOKUP took, by request id: {@code num_kv_readers} per hit chunk and kv rank.
 * RETRIEVE gives back one for its rank and chunks, FREE_LOOKUP_LOCKS what is left of a range,
 * END_SESSION everything; a lease older than the read TTL is dropped (the store reclaims the locks
 * on its own at the same TTL). Store calls happen outside this class's lock.
 */
public final class LookupLeases {
    /** More leases than this means a client is not ending its sessions: the oldest are released. */
    static final int MAX_LEASES = 1 << 20;

    private static final class Lease {
        final ObjectStore.ReadLock[] locks;
        final int[] remaining;
        final int worldSize;
        final long createdNs;

        Lease(ObjectStore.ReadLock[] locks, int readers, int worldSize, long createdNs) {
            this.locks = locks;
            this.remaining = new int[locks.length];
            Arrays.fill(remaining, readers);
            this.worldSize = worldSize;
            this.createdNs = createdNs;
        }

        int chunks() {
            return locks.length / worldSize;
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

    /** Records the locks of a lookup (chunk-major, then rank), replacing (and releasing) an older lease of the same id. */
    public void put(String requestId, List<ObjectStore.ReadLock> locks, int worldSize, int readers) {
        List<Release> releases = new ArrayList<>();
        synchronized (this) {
            Lease old = locks.isEmpty() ? leases.remove(requestId)
                    : leases.put(requestId, new Lease(locks.toArray(ObjectStore.ReadLock[]::new), readers, worldSize, clockNs.getAsLong()));
            if (old != null) {
                collectAll(old, releases);
            }
            if (leases.size() > MAX_LEASES) {
                dropOldest(releases);
            }
        }
        apply(releases);
    }

    /** One lock per chunk in {@code [fromChunk, toChunk)} for {@code rank}: a RETRIEVE (successful or not) of that range. */
    public void releaseRetrieved(String requestId, int rank, int fromChunk, int toChunk) {
        List<Release> releases = new ArrayList<>();
        synchronized (this) {
            Lease lease = leases.get(requestId);
            if (lease == null || rank < 0 || rank >= lease.worldSize) {
                return;
            }
            for (int chunk = Math.max(0, fromChunk); chunk < Math.min(toChunk, lease.chunks()); chunk++) {
                int index = chunk * lease.worldSize + rank;
                if (lease.remaining[index] > 0) {
                    lease.remaining[index]--;
                    releases.add(new Release(lease.locks[index], 1));
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
            for (int chunk = Math.max(0, fromChunk); chunk < Math.min(toChunk, lease.chunks()); chunk++) {
                for (int rank = 0; rank < lease.worldSize; rank++) {
                    int index = chunk * lease.worldSize + rank;
                    if (lease.remaining[index] > 0) {
                        releases.add(new Release(lease.locks[index], lease.remaining[index]));
                        lease.remaining[index] = 0;
                    }
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
