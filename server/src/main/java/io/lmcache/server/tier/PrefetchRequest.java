package io.lmcache.server.tier;

import io.lmcache.server.l2.Bitmap;
import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.module.L2Prefetcher;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ChunkKey;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoreCounters;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.transfer.ChunkHashes;
import io.lmcache.server.transfer.ObjectShape;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * One LOOKUP's L2 prefetch (hybrid-and-l2.md §B.4), a small state machine driven by the prefetch
 * controller on lmcache-l2. Its keys are the chunks after the L1 hit, chunk-major (every kv rank,
 * then every object group). Steps: see which keys L1 has; ask every adapter to look up and lock the
 * others; fold L1 ∪ L2 into a prefix; lock the L1 keys of the prefix and reserve L1 objects for the
 * rest, each loaded by the lowest adapter that has it; fold again over what could be reserved;
 * unlock in L2 at once what will not be loaded; load; unlock the loaded keys; publish each loaded
 * object with its readers' locks in one step, drop the failed ones and fold a last time.
 *
 * <p>Past its deadline the controller {@link #expire expires} it: the LOOKUP is answered with its
 * L1 hits at once, the L1 locks it took since are given back, and each adapter's late answer is
 * cleaned up as it comes (found keys unlocked; a load's reserved objects dropped only then, since
 * the load writes into them until it answers). The L2 keys carry LMCache's packed kv rank and the
 * object's format; L1 keys carry the rank index.
 */
final class PrefetchRequest {
    /** A job waiting for its turn, with the object shapes its model had when it was submitted, and when that was. */
    record Pending(L2Prefetcher.Job job, List<ObjectShape> shapes, long submittedNs) {}

    private enum Stage { LOOKUP, LOAD, DONE }

    private final PrefetchContext ctx;
    private final L2Prefetcher.Job job;
    private final List<ObjectShape> shapes;
    private final int readers;
    private final int keysPerChunk;
    private final int chunks;
    private final long submittedNs;
    private final L2Key[] keys;
    /** The same keys as L1 names them. */
    private final ChunkKey[] l1Keys;
    /** Per key, its kv rank index (what L1 keys objects by). */
    private final int[] ranks;
    private final boolean[] inL1;
    private final int[] asked;
    private final long[] lookupTasks;
    private final Bitmap[] found;
    private final int[] owner;
    private final StoredObject[] reserved;
    private final ObjectStore.ReadLock[] locks;
    private final Bitmap ok;
    private final long[] loadTasks;
    private final int[][] loadIndices;
    private final Bitmap[] loaded;
    /** Its series; the loads' in-flight gauges are left exactly once however a load ends. */
    private final PrefetchMeter meter;
    private Stage stage = Stage.LOOKUP;
    /** The LOOKUP has its answer (the job is complete): at the end, or at expiry. */
    private boolean answered;
    private boolean expired;

    PrefetchRequest(PrefetchContext ctx, L2Prefetcher.Job job, List<ObjectShape> shapes, long submittedNs) {
        this.ctx = ctx;
        this.job = job;
        this.shapes = List.copyOf(shapes);
        this.submittedNs = submittedNs;
        CacheKey key = job.key();
        this.readers = key.readLocks();
        this.keysPerChunk = key.worldSize() * shapes.size();
        this.chunks = job.endChunk() - job.l1Hits();
        int n = chunks * keysPerChunk;
        this.keys = new L2Key[n];
        this.l1Keys = new ChunkKey[n];
        this.ranks = new int[n];
        this.inL1 = new boolean[n];
        int adapters = ctx.adapters().size();
        this.lookupTasks = new long[adapters];
        this.found = new Bitmap[adapters];
        this.owner = new int[n];
        this.reserved = new StoredObject[n];
        this.locks = new ObjectStore.ReadLock[n];
        this.ok = new Bitmap(n);
        this.loadTasks = new long[adapters];
        this.loadIndices = new int[adapters][];
        this.loaded = new Bitmap[adapters];
        this.meter = new PrefetchMeter(ctx.metrics(), adapters);
        this.asked = start();
    }

    long submittedNs() {
        return submittedNs;
    }

    /** Every adapter has answered and everything is handed over or given back. */
    boolean done() {
        return stage == Stage.DONE;
    }

    /** The LOOKUP has its answer (it may still be waiting for adapters' late answers to clean up). */
    boolean answered() {
        return answered;
    }

    /** Hashes the rest of the prompt, finds what L1 has and asks every adapter about the others. */
    private int[] start() {
        CacheKey key = job.key();
        if (job.hashedChunks() < job.endChunk()) {
            ChunkHashes.extend(key, ctx.chunkSize(), job.hashedChunks(), job.endChunk(), job.hashes());
        }
        int n = keys.length;
        int[] groups = new int[n];
        for (int i = 0; i < n; i++) {
            int chunk = job.l1Hits() + i / keysPerChunk;
            ranks[i] = i % keysPerChunk / shapes.size();
            ObjectShape shape = shapes.get(i % shapes.size());
            groups[i] = shape.objectGroup();
            ChunkHash hash = ChunkHash.unpack(job.hashes(), chunk);
            keys[i] = L2Keys.of(key.modelName(), L2Key.packKvRank(key.worldSize(), ranks[i]), hash, key.cacheSalt(), shape);
            l1Keys[i] = new ChunkKey(key.modelName(), key.cacheSalt(), key.tags(), ranks[i], groups[i], hash);
        }
        ctx.store().readyKeys(l1Keys, inL1);
        List<Integer> ask = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            if (!inL1[i]) {
                ask.add(i);
            }
        }
        int[] askedKeys = ask.stream().mapToInt(Integer::intValue).toArray();
        List<L2Key> askList = ask.stream().map(i -> keys[i]).toList();
        Map<Integer, Long> bytesByGroup = new HashMap<>();
        shapes.forEach(shape -> bytesByGroup.put(shape.objectGroup(), shape.objectBytes()));
        meter.lookingUp(key, askedKeys.length);
        for (int a = 0; a < ctx.adapters().size(); a++) {
            lookupTasks[a] = ctx.adapters().get(a).submitLookupAndLock(askList, bytesByGroup);
        }
        return askedKeys;
    }

    /** Advances as far as the adapters' results allow; returns how much it did. */
    int poll() {
        List<L2Adapter> adapters = ctx.adapters();
        int work = 0;
        if (stage == Stage.LOOKUP) {
            boolean all = true;
            for (int a = 0; a < adapters.size(); a++) {
                if (found[a] == null) {
                    found[a] = adapters.get(a).queryLookupAndLock(lookupTasks[a]);
                    work += found[a] == null ? 0 : 1;
                    all &= found[a] != null;
                }
            }
            if (all && expired) {
                unlockNotLoaded(0); // nothing will be loaded: every key found is unlocked
                stage = Stage.DONE;
                work++;
            } else if (all) {
                plan();
                work++;
            }
        } else if (stage == Stage.LOAD) {
            boolean all = true;
            for (int a = 0; a < adapters.size(); a++) {
                if (loadIndices[a] != null && loaded[a] == null) {
                    loaded[a] = adapters.get(a).queryLoad(loadTasks[a]);
                    if (loaded[a] != null) {
                        meter.answered(a);
                        work++;
                    }
                    all &= loaded[a] != null;
                }
            }
            if (expired) {
                work += cleanUpLateLoads();
            } else if (all) {
                loadFinished();
                work++;
            }
        }
        return work;
    }

    /**
     * Past the deadline: the LOOKUP is answered with its L1 hits now and the L1 locks taken since are given back. What the adapters
     * hold is given back as each answers ({@link #poll}): reserved objects are never dropped while a load may write into them.
     */
    void expire() {
        if (answered) {
            return;
        }
        expired = true;
        answered = true;
        job.completion().done(job.l1Hits(), job.l1Locks(), 0);
        for (int i = 0; i < keys.length; i++) {
            if (locks[i] != null) {
                ctx.store().releaseRead(locks[i], readers);
                locks[i] = null;
            }
        }
        if (stage == Stage.LOAD) {
            cleanUpLateLoads();
        }
    }

    /** Expired, loading: each adapter whose load answered gets its keys unlocked and their reserved objects dropped; done when all did. */
    private int cleanUpLateLoads() {
        int work = 0;
        boolean all = true;
        for (int a = 0; a < loadIndices.length; a++) {
            if (loadIndices[a] == null || !meter.inFlight(a)) {
                continue;
            }
            if (loaded[a] == null) {
                all = false;
                continue;
            }
            countLoad(a);
            List<L2Key> unlock = new ArrayList<>(loadIndices[a].length);
            for (int i : loadIndices[a]) {
                unlock.add(keys[i]);
                ctx.store().abort(reserved[i]);
                reserved[i] = null;
            }
            ctx.adapters().get(a).submitUnlock(unlock);
            work++;
        }
        if (all) {
            stage = Stage.DONE;
        }
        return work;
    }

    private void plan() {
        int n = keys.length;
        Bitmap present = new Bitmap(n);
        for (int i = 0; i < n; i++) {
            owner[i] = -1;
            if (inL1[i]) {
                present.set(i);
            }
        }
        for (int a = found.length - 1; a >= 0; a--) {
            for (int j : found[a].indices()) {
                owner[asked[j]] = a; // walked from the last adapter down: the lowest that has the key wins
                present.set(asked[j]);
            }
        }
        ctx.metrics().prefetchHitObjects.add(present.popcount() - countL1());
        int prefix = ctx.fold().hitChunks(present, chunks, keysPerChunk) * keysPerChunk;
        CacheKey key = job.key();
        int noMemory = 0;
        for (int i = 0; i < prefix; i++) {
            if (owner[i] >= 0) {
                ObjectShape shape = shapes.get(i % shapes.size());
                StoredObject object = ctx.store().reserve(l1Keys[i], shape.objectBytes(), shape.format(), StoreCounters.DURING_L2_PREFETCH);
                if (object == ObjectStore.NO_MEMORY) {
                    noMemory++;
                    continue;
                }
                if (object != ObjectStore.EXISTS) {
                    reserved[i] = object;
                    ok.set(i);
                    continue;
                }
                // stored meanwhile (by a STORE or another prefetch): used from L1 if it is readable now
            }
            if (lockL1(i)) {
                ok.set(i);
            }
        }
        // the store counted them as l1_allocation_failure_chunks{during="l2_prefetch"}
        ctx.metrics().prefetchL1Oom.add(key.modelName(), noMemory);
        int kept = releaseBeyond(ctx.fold().hitChunks(ok, chunks, keysPerChunk) * keysPerChunk);
        unlockNotLoaded(kept);
        submitLoads(kept);
    }

    private int countL1() {
        int count = 0;
        for (boolean l1 : inL1) {
            count += l1 ? 1 : 0;
        }
        return count;
    }

    private boolean lockL1(int i) {
        List<ObjectStore.ReadLock> taken = new ArrayList<>(1);
        if (!ctx.store().lockReady(l1Keys[i], readers, taken)) {
            return false;
        }
        locks[i] = taken.isEmpty() ? null : taken.getFirst();
        return true;
    }

    /** Gives back everything held for keys from {@code keep} on (outside the prefix); returns {@code keep}. */
    private int releaseBeyond(int keep) {
        for (int i = keys.length - 1; i >= keep; i--) {
            if (reserved[i] != null) {
                ctx.store().abort(reserved[i]);
                reserved[i] = null;
            }
            if (locks[i] != null) {
                ctx.store().releaseRead(locks[i], readers);
                locks[i] = null;
            }
            ok.clear(i);
        }
        return keep;
    }

    /** Phase-1 unlock: each adapter's found keys that it will not load are unlocked in L2 at once. */
    private void unlockNotLoaded(int prefix) {
        for (int a = 0; a < found.length; a++) {
            List<L2Key> unlock = new ArrayList<>();
            for (int j : found[a].indices()) {
                int i = asked[j];
                if (!(i < prefix && owner[i] == a && reserved[i] != null)) {
                    unlock.add(keys[i]);
                }
            }
            if (!unlock.isEmpty()) {
                ctx.adapters().get(a).submitUnlock(unlock);
            }
        }
    }

    private void submitLoads(int prefix) {
        boolean any = false;
        for (int a = 0; a < ctx.adapters().size(); a++) {
            List<Integer> indices = new ArrayList<>();
            for (int i = 0; i < prefix; i++) {
                if (owner[i] == a && reserved[i] != null) {
                    indices.add(i);
                }
            }
            if (indices.isEmpty()) {
                continue;
            }
            loadIndices[a] = indices.stream().mapToInt(Integer::intValue).toArray();
            List<L2Key> loadKeys = new ArrayList<>(indices.size());
            List<MemorySegment> buffers = new ArrayList<>(indices.size());
            long bytes = 0;
            for (int i : loadIndices[a]) {
                loadKeys.add(keys[i]);
                buffers.add(ctx.pool().asSlice(reserved[i].offset(), reserved[i].bytes()));
                bytes += reserved[i].bytes();
            }
            meter.submitting(a, job.key(), indices.size(), bytes);
            loadTasks[a] = ctx.adapters().get(a).submitLoad(loadKeys, buffers);
            any = true;
        }
        if (any) {
            stage = Stage.LOAD;
        } else {
            finish(prefix / Math.max(1, keysPerChunk));
        }
    }

    /** Phase-2 unlock, then each loaded object published with its read locks, the failed ones dropped, and a last fold. */
    private void loadFinished() {
        int published = 0;
        int notFound = 0;
        for (int a = 0; a < loadIndices.length; a++) {
            if (loadIndices[a] == null) {
                continue;
            }
            countLoad(a);
            List<L2Key> unlock = new ArrayList<>(loadIndices[a].length);
            for (int j = 0; j < loadIndices[a].length; j++) {
                int i = loadIndices[a][j];
                unlock.add(keys[i]);
                if (loaded[a].get(j)) {
                    published += publish(i) ? 1 : 0;
                } else {
                    ctx.store().abort(reserved[i]);
                    reserved[i] = null;
                    ok.clear(i);
                    notFound++;
                }
            }
            ctx.adapters().get(a).submitUnlock(unlock);
        }
        meter.loadsFinished(job.key(), published, notFound);
        int prefix = releaseBeyond(ctx.fold().hitChunks(ok, chunks, keysPerChunk) * keysPerChunk);
        finish(prefix / Math.max(1, keysPerChunk));
    }

    /** Adapter {@code a}'s load answered (in time or late): it leaves the in-flight gauges, counted with the bytes it loaded. */
    private void countLoad(int a) {
        long bytes = 0;
        for (int j = 0; j < loadIndices[a].length; j++) {
            if (loaded[a].get(j)) {
                bytes += reserved[loadIndices[a][j]].bytes();
            }
        }
        meter.counted(a, bytes);
    }

    /** Publishes loaded object {@code i}; false when it was reclaimed first. */
    private boolean publish(int i) {
        StoredObject object = reserved[i];
        ObjectStore.ReadLock lock = ctx.store().commitLoaded(object, readers, !ctx.retain());
        if (readers > 0 && lock == null) {
            // reclaimed before it was published (a forced clear): its memory is gone
            reserved[i] = null;
            ok.clear(i);
            return false;
        }
        locks[i] = lock;
        return true;
    }

    /** Hands the job back: the L1 locks of the LOOKUP, then this prefix's, chunk-major. */
    private void finish(int hitChunks) {
        List<ObjectStore.ReadLock> all = new ArrayList<>(job.l1Locks());
        int l2Keys = 0;
        for (int i = 0; i < hitChunks * keysPerChunk; i++) {
            if (locks[i] != null) {
                all.add(locks[i]);
            }
            l2Keys += owner[i] >= 0 && reserved[i] != null ? 1 : 0;
        }
        stage = Stage.DONE;
        answered = true;
        job.completion().done(job.l1Hits() + hitChunks, all, l2Keys);
    }

    /** Shutdown before the adapters answered: the LOOKUP is answered with its L1 hits; what this request holds stays until TTL. */
    void abandon() {
        meter.abandoned(); // loads that never answered (or whose late answer was not cleaned up yet) leave the in-flight gauges
        stage = Stage.DONE;
        if (!answered) {
            answered = true;
            job.completion().done(job.l1Hits(), job.l1Locks(), 0);
        }
    }
}
