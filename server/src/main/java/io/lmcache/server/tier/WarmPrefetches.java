package io.lmcache.server.tier;

import io.lmcache.server.agent.Agent;
import io.lmcache.server.l2.Bitmap;
import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.RequestConfigs;
import io.lmcache.server.protocol.RequestTags;
import io.lmcache.server.storage.ChunkHash;
import io.lmcache.server.storage.ChunkKey;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoreCounters;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.transfer.ChunkHashes;
import io.lmcache.server.transfer.ObjectShape;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * LMCache's warm prefetch (LMCache {@code mp/warm_prefetch.py}, {@code mp/cache_control/prefetch_service.py}@45841c53;
 * fleet-and-operator-api.md §2.2): a token sequence's keys loaded from L2 into L1 and left there retained and unlocked (no reader
 * waits for them: a later LOOKUP takes its own locks), every key not already in L1 ({@code fetching_policy="full"}, no prefix
 * fold). An agent on lmcache-l2 beside the LOOKUP prefetcher, woken by the same adapter signals.
 *
 * <p>Keys are the LOOKUP's fan-out of the registered layout: chunk-major, then kv rank, then object group (one group: LMCache's
 * {@code resolve_l1_keys} order). A job moves through windows of {@link #WINDOW_KEYS} keys (look up and lock in every adapter, reserve
 * in L1 what the lowest holding adapter loads, load, publish), so it never holds more than a window of L1 reservations.
 *
 * <p>Bounded: at most {@link #MAX_JOBS} jobs held (waiting, running or completed and not yet polled), {@link #MAX_RUNNING} running;
 * a completed job nobody polls is forgotten after {@link #COMPLETED_TTL_NS}. The first poll that sees a job completed takes its
 * result and forgets it (LMCache's exactly-once), later polls answer unknown.
 */
public final class WarmPrefetches implements Agent {
    /** Jobs held at once: waiting, running, or completed and not yet polled. */
    public static final int MAX_JOBS = 64;
    static final int MAX_RUNNING = 2;
    static final int WINDOW_KEYS = 256;
    /** Keys of one job, at most: its hashes and result bitmap stay small; the pool holds far fewer objects anyway. */
    public static final int MAX_KEYS_PER_JOB = 1 << 20;
    /** A completed job unpolled this long is dropped (LMCache's mover polls for up to 600 s). */
    static final long COMPLETED_TTL_NS = TimeUnit.MINUTES.toNanos(10);
    private static final long SWEEP_INTERVAL_NS = TimeUnit.SECONDS.toNanos(1);

    /** What a submission got. */
    public sealed interface Submitted {
        /** Taken: poll {@code requestId}; {@code chunks} whole chunks, {@code totalKeys} keys. */
        record Accepted(String requestId, int chunks, int totalKeys) implements Submitted {}

        /** Fewer tokens than a chunk: nothing to load (LMCache's {@code "noop"}). */
        record Noop() implements Submitted {}

        /** No worker registered the model at that world size: LMCache's 503. */
        record NoLayout() implements Submitted {}

        /** More keys than {@link #MAX_KEYS_PER_JOB}. */
        record TooManyKeys(long keys) implements Submitted {}

        /** {@link #MAX_JOBS} jobs are held already. */
        record Full() implements Submitted {}
    }

    /** What a poll saw. */
    public sealed interface Status {
        record Pending() implements Status {}

        /** {@code missing}: positions, in key order, that this load did not bring into L1 (those resident before included). */
        record Completed(int foundKeys, int totalKeys, int[] missing) implements Status {}

        /** Never submitted, completed and polled already, or expired. */
        record Unknown() implements Status {}
    }

    private final PrefetchContext ctx;
    private final ObjectShapes shapes;
    private final Runnable wake;
    private final LongSupplier nanoClock;
    private final Map<String, Job> jobs = new ConcurrentHashMap<>();
    private final AtomicInteger held = new AtomicInteger();
    private final ConcurrentLinkedQueue<Job> incoming = new ConcurrentLinkedQueue<>();
    private final ArrayDeque<Job> waiting = new ArrayDeque<>();
    private final List<Job> running = new ArrayList<>();
    private final LongAdder loadedKeys = new LongAdder();
    private final LongAdder completedJobs = new LongAdder();
    private final LongAdder expiredJobs = new LongAdder();
    private long nextSweepNs;

    WarmPrefetches(PrefetchContext ctx, ObjectShapes shapes, Runnable wake, LongSupplier nanoClock) {
        this.ctx = ctx;
        this.shapes = shapes;
        this.wake = wake;
        this.nanoClock = nanoClock;
    }

    @Override
    public String roleName() {
        return "l2-warm-prefetch";
    }

    /**
     * Resolves {@code tokens}' keys and queues their load; runs on the caller's thread (an HTTP exchange): hashing, a map insert,
     * a wake-up. {@code salt} "" for none; it is part of every key, so a salted chunk is reached only with its salt.
     */
    public Submitted submit(String model, int worldSize, int[] tokens, String salt) {
        List<ObjectShape> layout = shapes.shapes(model, worldSize);
        if (layout == null || layout.isEmpty() || worldSize > L2Key.MAX_WORLD_SIZE) {
            return new Submitted.NoLayout();
        }
        int chunkSize = ctx.chunkSize();
        int chunks = tokens.length / chunkSize;
        if (chunks == 0) {
            return new Submitted.Noop();
        }
        long keys = (long) chunks * worldSize * layout.size();
        if (keys > MAX_KEYS_PER_JOB) {
            return new Submitted.TooManyKeys(keys);
        }
        if (held.incrementAndGet() > MAX_JOBS) {
            held.decrementAndGet();
            return new Submitted.Full();
        }
        CacheKey key = new CacheKey(model, worldSize, 0, tokens, 0, chunks * chunkSize, "warm-prefetch", salt, 0, RequestConfigs.NONE);
        Job job = new Job(UUID.randomUUID().toString().replace("-", ""), model, worldSize, salt, List.copyOf(layout),
                ChunkHashes.of(key, chunkSize, chunks), (int) keys);
        jobs.put(job.id, job);
        incoming.add(job);
        wake.run();
        return new Submitted.Accepted(job.id, chunks, (int) keys);
    }

    /** A job's state; the first poll that sees it completed takes the result and forgets the job. Any thread. */
    public Status poll(String requestId) {
        Job job = jobs.get(requestId);
        if (job == null) {
            return new Status.Unknown();
        }
        Status.Completed result = job.result;
        if (result == null) {
            return new Status.Pending();
        }
        if (!jobs.remove(requestId, job)) {
            return new Status.Unknown(); // a concurrent poll took it
        }
        held.decrementAndGet();
        return result;
    }

    @Override
    public int doWork() {
        int work = 0;
        for (Job job = incoming.poll(); job != null; job = incoming.poll()) {
            waiting.add(job);
            work++;
        }
        while (running.size() < MAX_RUNNING && !waiting.isEmpty()) {
            running.add(waiting.poll());
            work++;
        }
        for (Iterator<Job> it = running.iterator(); it.hasNext(); ) {
            Job job = it.next();
            work += job.step();
            if (job.result != null) {
                it.remove();
            }
        }
        long nowNs = nanoClock.getAsLong();
        if (nowNs - nextSweepNs >= 0) {
            nextSweepNs = nowNs + SWEEP_INTERVAL_NS;
            work += sweep(nowNs);
        }
        return work;
    }

    /** Drops the completed jobs nobody polled in time. */
    private int sweep(long nowNs) {
        int dropped = 0;
        for (Job job : jobs.values()) {
            if (job.result != null && nowNs - job.completedNs > COMPLETED_TTL_NS && jobs.remove(job.id, job)) {
                held.decrementAndGet();
                expiredJobs.increment();
                dropped++;
            }
        }
        return dropped;
    }

    /**
     * Shutdown: the jobs are forgotten. A load still in flight may write into its reserved objects until its adapter drains, so
     * they are not given back here: the store's write TTL reclaims them, as an abandoned LOOKUP prefetch's.
     */
    @Override
    public void onClose() {
        incoming.clear();
        waiting.clear();
        running.clear();
        jobs.clear();
        held.set(0);
    }

    /** {@code /status} {@code storage_manager.warm_prefetch}: counters only. */
    public Map<String, Object> status() {
        Map<String, Object> status = new LinkedHashMap<>();
        status.put("held_job_count", Math.max(0, held.get()));
        status.put("max_jobs", MAX_JOBS);
        status.put("completed_job_count", completedJobs.sum());
        status.put("expired_job_count", expiredJobs.sum());
        status.put("loaded_key_count", loadedKeys.sum());
        return status;
    }

    /** Keys loaded into L1 by warm prefetches since start. */
    public long loadedKeys() {
        return loadedKeys.sum();
    }

    private enum Stage { NEXT, LOOKUP, LOAD }

    /** One warm prefetch, advanced a window at a time on lmcache-l2. */
    private final class Job {
        final String id;
        final String model;
        final int worldSize;
        final String salt;
        final List<ObjectShape> layout;
        final byte[] hashes;
        final int keysPerChunk;
        final int total;
        final Bitmap loaded;
        volatile Status.Completed result;
        long completedNs;
        private Stage stage = Stage.NEXT;
        private int from;
        private int to;
        private Window window;

        Job(String id, String model, int worldSize, String salt, List<ObjectShape> layout, byte[] hashes, int total) {
            this.id = id;
            this.model = model;
            this.worldSize = worldSize;
            this.salt = salt;
            this.layout = layout;
            this.hashes = hashes;
            this.keysPerChunk = worldSize * layout.size();
            this.total = total;
            this.loaded = new Bitmap(total);
        }

        /** Advances as far as the adapters' answers allow; returns how much it did. */
        int step() {
            return switch (stage) {
                case NEXT -> startWindow();
                case LOOKUP -> window.pollLookups() ? 1 : 0;
                case LOAD -> window.pollLoads() ? 1 : 0;
            };
        }

        private int startWindow() {
            if (from >= total) {
                complete();
                return 1;
            }
            to = Math.min(total, from + WINDOW_KEYS);
            window = new Window(this, from, to);
            stage = window.lookUp() ? Stage.LOOKUP : Stage.NEXT;
            if (stage == Stage.NEXT) {
                from = to;
            }
            return 1;
        }

        void lookedUp(boolean loading) {
            stage = loading ? Stage.LOAD : Stage.NEXT;
            if (!loading) {
                endWindow();
            }
        }

        void endWindow() {
            window = null;
            from = to;
            stage = Stage.NEXT;
        }

        private void complete() {
            int found = loaded.popcount();
            loadedKeys.add(found);
            completedJobs.increment();
            completedNs = nanoClock.getAsLong();
            result = new Status.Completed(found, total, loaded.not().indices());
        }

        L2Key l2Key(int i) {
            ObjectShape shape = layout.get(i % layout.size());
            return L2Keys.of(model, L2Key.packKvRank(worldSize, i % keysPerChunk / layout.size()), hash(i), salt, shape);
        }

        ChunkKey l1Key(int i) {
            return new ChunkKey(model, salt, RequestTags.NONE, i % keysPerChunk / layout.size(), layout.get(i % layout.size()).objectGroup(),
                    hash(i));
        }

        ObjectShape shape(int i) {
            return layout.get(i % layout.size());
        }

        private ChunkHash hash(int i) {
            return ChunkHash.unpack(hashes, i / keysPerChunk);
        }
    }

    /** One window of a job: its keys not in L1, each adapter's lookup, then the loads of those reserved in L1. */
    private final class Window {
        private final Job job;
        private final int from;
        private final L2Key[] keys;
        private final ChunkKey[] l1Keys;
        private int[] asked;
        private final long[] lookupTasks;
        private final Bitmap[] found;
        private int[] owner;
        private StoredObject[] reserved;
        private final long[] loadTasks;
        private final int[][] loadIndices;
        private final Bitmap[] loadedBits;

        Window(Job job, int from, int to) {
            this.job = job;
            this.from = from;
            int n = to - from;
            keys = new L2Key[n];
            l1Keys = new ChunkKey[n];
            for (int j = 0; j < n; j++) {
                keys[j] = job.l2Key(from + j);
                l1Keys[j] = job.l1Key(from + j);
            }
            int adapters = ctx.adapters().size();
            lookupTasks = new long[adapters];
            found = new Bitmap[adapters];
            loadTasks = new long[adapters];
            loadIndices = new int[adapters][];
            loadedBits = new Bitmap[adapters];
        }

        /** Asks every adapter for the keys L1 does not hold; false when there are none (the window is done). */
        boolean lookUp() {
            boolean[] inL1 = new boolean[keys.length];
            ctx.store().readyKeys(l1Keys, inL1);
            List<Integer> ask = new ArrayList<>();
            for (int j = 0; j < keys.length; j++) {
                if (!inL1[j]) {
                    ask.add(j);
                }
            }
            if (ask.isEmpty() || ctx.adapters().isEmpty()) {
                return false;
            }
            asked = ask.stream().mapToInt(Integer::intValue).toArray();
            List<L2Key> askList = ask.stream().map(j -> keys[j]).toList();
            Map<Integer, Long> bytesByGroup = new HashMap<>();
            job.layout.forEach(shape -> bytesByGroup.put(shape.objectGroup(), shape.objectBytes()));
            for (int a = 0; a < ctx.adapters().size(); a++) {
                lookupTasks[a] = ctx.adapters().get(a).submitLookupAndLock(askList, bytesByGroup);
            }
            return true;
        }

        /** True when every adapter has answered and the loads went out (or none was needed). */
        boolean pollLookups() {
            List<L2Adapter> adapters = ctx.adapters();
            boolean all = true;
            for (int a = 0; a < adapters.size(); a++) {
                if (found[a] == null) {
                    found[a] = adapters.get(a).queryLookupAndLock(lookupTasks[a]);
                    all &= found[a] != null;
                }
            }
            if (all) {
                job.lookedUp(reserveAndLoad());
            }
            return all;
        }

        /** Reserves in L1 each key the lowest adapter holding it will load, unlocks the rest in L2, submits the loads. */
        private boolean reserveAndLoad() {
            owner = new int[keys.length];
            reserved = new StoredObject[keys.length];
            Arrays.fill(owner, -1);
            for (int a = found.length - 1; a >= 0; a--) {
                for (int idx : found[a].indices()) {
                    owner[asked[idx]] = a; // walked from the last adapter down: the lowest that has the key wins
                }
            }
            for (int j : asked) {
                if (owner[j] < 0) {
                    continue;
                }
                ObjectShape shape = job.shape(from + j);
                StoredObject object = ctx.store().reserve(l1Keys[j], shape.objectBytes(), shape.format(), StoreCounters.DURING_L2_PREFETCH);
                if (object != ObjectStore.NO_MEMORY && object != ObjectStore.EXISTS) {
                    reserved[j] = object;
                }
            }
            for (int a = 0; a < found.length; a++) {
                List<L2Key> unlock = new ArrayList<>();
                for (int idx : found[a].indices()) {
                    int j = asked[idx];
                    if (!(owner[j] == a && reserved[j] != null)) {
                        unlock.add(keys[j]);
                    }
                }
                if (!unlock.isEmpty()) {
                    ctx.adapters().get(a).submitUnlock(unlock);
                }
            }
            boolean any = false;
            for (int a = 0; a < found.length; a++) {
                List<Integer> mine = new ArrayList<>();
                for (int j = 0; j < keys.length; j++) {
                    if (owner[j] == a && reserved[j] != null) {
                        mine.add(j);
                    }
                }
                if (mine.isEmpty()) {
                    continue;
                }
                loadIndices[a] = mine.stream().mapToInt(Integer::intValue).toArray();
                List<L2Key> loadKeys = new ArrayList<>(mine.size());
                List<MemorySegment> buffers = new ArrayList<>(mine.size());
                for (int j : loadIndices[a]) {
                    loadKeys.add(keys[j]);
                    buffers.add(ctx.pool().asSlice(reserved[j].offset(), reserved[j].bytes()));
                }
                loadTasks[a] = ctx.adapters().get(a).submitLoad(loadKeys, buffers);
                any = true;
            }
            return any;
        }

        /** True when every load answered: loaded objects published (retained, unlocked), the others dropped, L2 unlocked. */
        boolean pollLoads() {
            List<L2Adapter> adapters = ctx.adapters();
            boolean all = true;
            for (int a = 0; a < adapters.size(); a++) {
                if (loadIndices[a] != null && loadedBits[a] == null) {
                    loadedBits[a] = adapters.get(a).queryLoad(loadTasks[a]);
                    all &= loadedBits[a] != null;
                }
            }
            if (!all) {
                return false;
            }
            List<Integer> published = new ArrayList<>();
            for (int a = 0; a < adapters.size(); a++) {
                if (loadIndices[a] == null) {
                    continue;
                }
                List<L2Key> unlock = new ArrayList<>(loadIndices[a].length);
                for (int k = 0; k < loadIndices[a].length; k++) {
                    int j = loadIndices[a][k];
                    unlock.add(keys[j]);
                    if (loadedBits[a].get(k)) {
                        // no readers: kept as an ordinary object, neither locked nor freed with a last reader
                        ctx.store().commitLoaded(reserved[j], 0, false);
                        published.add(j);
                    } else {
                        ctx.store().abort(reserved[j]);
                    }
                    reserved[j] = null;
                }
                adapters.get(a).submitUnlock(unlock);
            }
            markLoaded(published);
            job.endWindow();
            return true;
        }

        /** A published object counts as loaded while it is READY (a forced clear may have reclaimed it before it was published). */
        private void markLoaded(List<Integer> published) {
            ChunkKey[] check = published.stream().map(j -> l1Keys[j]).toArray(ChunkKey[]::new);
            boolean[] ready = new boolean[check.length];
            ctx.store().readyKeys(check, ready);
            for (int k = 0; k < check.length; k++) {
                if (ready[k]) {
                    job.loaded.set(from + published.get(k));
                }
            }
        }
    }
}
