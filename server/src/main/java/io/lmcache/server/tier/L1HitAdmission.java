package io.lmcache.server.tier;

import io.lmcache.server.module.L2Prefetcher;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.storage.ChunkKey;
import io.lmcache.server.storage.Committed;
import io.lmcache.server.storage.ObjectKey;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.tier.admission.L2WriteGate;
import java.util.ArrayList;
import java.util.List;

/**
 * The LOOKUP side of {@code --l2-admission frequency:N}: the prefetcher as the LOOKUP path sees it, which first tells the
 * {@link L2WriteGate} of each object the LOOKUP found in L1 (one sighting each) and sends those that sighting admitted to the
 * write-through, pinned, while they are still in L1. Without it a chunk turned away at its one STORE would reach L2 only if it
 * were evicted and stored again, a reuse later than {@code all} has it. Runs on the LOOKUP's thread.
 */
final class L1HitAdmission implements L2Prefetcher {
    private final L2Prefetcher prefetcher;
    private final L2WriteGate gate;
    private final ObjectStore store;
    private final StoreController writes;

    L1HitAdmission(L2Prefetcher prefetcher, L2WriteGate gate, ObjectStore store, StoreController writes) {
        this.prefetcher = prefetcher;
        this.gate = gate;
        this.store = store;
        this.writes = writes;
    }

    /** {@code prefetcher} itself when the gate does not count LOOKUPs ({@code all}). */
    static L2Prefetcher wrap(L2Prefetcher prefetcher, L2WriteGate gate, ObjectStore store, StoreController writes) {
        return gate.countsLookups() ? new L1HitAdmission(prefetcher, gate, store, writes) : prefetcher;
    }

    @Override
    public boolean submit(Job job) {
        sighted(job);
        return prefetcher.submit(job);
    }

    @Override
    public int touch(CacheKey key, byte[] hashes, int toChunk) {
        return prefetcher.touch(key, hashes, toChunk);
    }

    /** The job's L1 read locks name the objects found (the LOOKUP's key gives their model and salt). */
    private void sighted(Job job) {
        CacheKey key = job.key();
        List<Committed> admitted = null;
        for (ObjectStore.ReadLock lock : job.l1Locks()) {
            StoredObject object = lock.object();
            ObjectKey id = object.key();
            ChunkKey chunk = new ChunkKey(key.modelName(), key.cacheSalt(), id.kvRank(), id.group(), id.hash());
            if (!gate.onL1Hit(chunk, object.bytes())) {
                continue;
            }
            StoredObject pinned = store.pinReady(chunk, object.bytes(), ObjectStore.ANY_LAYOUT);
            if (pinned != null) {
                if (admitted == null) {
                    admitted = new ArrayList<>();
                }
                admitted.add(new Committed(chunk, pinned));
            }
        }
        if (admitted != null) {
            writes.admitOnLookup(admitted);
        }
    }
}
