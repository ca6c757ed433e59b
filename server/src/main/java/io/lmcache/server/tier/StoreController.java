package io.lmcache.server.tier;

import io.lmcache.server.agent.Agent;
import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.l2.StoreResult;
import io.lmcache.server.metrics.L2Metrics;
import io.lmcache.server.storage.Committed;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoreListener;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.tier.admission.L2WriteGate;
import io.lmcache.server.transfer.ObjectGroupCatalog;
import io.lmcache.server.transfer.ObjectShape;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Write-through to L2 (hybrid-and-l2.md §B.3), an agent on lmcache-l2. Each object a STORE
 * publishes in L1 arrives here under the store's lock with a read hold on it (so eviction cannot
 * take it mid-write); this agent groups the objects by (model, kv rank, object group, format),
 * submits each group to every adapter, and gives the hold back when the last adapter has answered.
 * The L2 key carries LMCache's packed kv rank, so it needs the world size that wrote the object:
 * the one registered world size whose workers have objects of its group, size and format at its
 * rank; an object for which there is none, or more than one, stays L1-only, counted. With
 * {@code skip_l1}, an object every adapter stored then leaves L1, unless a LOOKUP of its model
 * would never look in L2 (hybrid models look up in L1 alone): those stay. A failed task is counted
 * and logged (the first in full, then at most once a minute) and never retried. The backlog of
 * held objects is bounded in bytes; past it, objects stay L1-only, counted. Before all that, the {@link L2WriteGate} decides
 * whether a committed object is sent at all ({@code --l2-admission}, the tenant's write budget): that is the one place the write
 * path asks it.
 */
public final class StoreController implements Agent, StoreListener {
    private static final Logger LOG = LoggerFactory.getLogger(StoreController.class);
    /** Objects submitted per task: large enough to batch, small enough that one slow key holds few others. */
    static final int MAX_TASK_OBJECTS = 64;
    private static final long FAILURE_LOG_INTERVAL_NS = 60_000_000_000L;

    /** Whether a LOOKUP of a model at a world size can load from L2 (else skip_l1 must keep its objects in L1). */
    @FunctionalInterface
    public interface L2Lookups {
        boolean consultsL2(String model, int worldSize);

        /**
         * Whether the model's object group is a sliding window (LMCache's {@code num_chunks_in_sw[g] >= 1}); false when unknown, so
         * such objects are stored as full attention, as LMCache's {@code full_attention_only_store_policy.py@4a195b29}.
         */
        default boolean slidingWindow(String model, int worldSize, int group) {
            return false;
        }

        /** Both answers from the registered object groups. */
        static L2Lookups of(ObjectGroupCatalog catalog) {
            return new L2Lookups() {
                @Override
                public boolean consultsL2(String model, int worldSize) {
                    return catalog.lookupGeometry(model, worldSize).plain();
                }

                @Override
                public boolean slidingWindow(String model, int worldSize, int group) {
                    int[] windows = catalog.lookupGeometry(model, worldSize).windowChunks();
                    return group >= 0 && group < windows.length && windows[group] >= 1;
                }
            };
        }
    }

    /** One committed object on its way to every adapter; {@code remaining} adapters have not answered yet. */
    private static final class Write {
        final Committed committed;
        /** A window commit's copy (LMCache's {@code StoreMode.FLUSH}): past the store policy, and it never leaves L1. */
        boolean flush;
        L2Key key;
        boolean mayLeaveL1;
        int remaining;
        boolean allOk = true;

        Write(Committed committed, int adapters) {
            this.committed = committed;
            this.remaining = adapters;
        }
    }

    private record Shape(String model, int kvRank, int group, long bytes, int format) {}

    /** One adapter's store task: its objects and when it was submitted (the throughput's start). */
    private record Task(List<Write> writes, long submittedNs) {}

    private final List<L2Adapter> adapters;
    private final ObjectStore store;
    private final MemorySegment pool;
    private final boolean skipL1;
    /** {@code --l2-store-policy full_attention_only}: the write-through leaves sliding-window objects in L1. */
    private volatile boolean fullAttentionOnly;
    private final ObjectShapes shapes;
    private final L2Lookups lookups;
    private final long maxBacklogBytes;
    private final L2WriteGate gate;
    private final L2Metrics metrics;
    private final ConcurrentLinkedQueue<Write> pending = new ConcurrentLinkedQueue<>();
    /** Bytes of objects held for L2 (queued or being written): the backlog bound. */
    private final AtomicLong heldBytes = new AtomicLong();
    private final AtomicLong pendingKeys = new AtomicLong();
    private final List<Map<Long, Task>> inFlight = new ArrayList<>();
    private final LongAdder failedTasks = new LongAdder();
    private final LongAdder failedKeys = new LongAdder();
    private final LongAdder keptInL1 = new LongAdder();
    private final Runnable wake;
    private volatile long processingKeys; // written on lmcache-l2 only, read by status
    private long lastFailureLogNs;
    private boolean failureLogged;

    /** What the write-through sends ({@code gate}) and how many bytes of L1 objects it may hold while they are written. */
    public record Admission(L2WriteGate gate, long maxBacklogBytes) {}

    public StoreController(List<L2Adapter> adapters, L1Side l1, boolean skipL1, ModelLayouts layouts, Admission admission, L2Metrics metrics,
            Runnable wake) {
        this.adapters = List.copyOf(adapters);
        this.store = l1.store();
        this.pool = l1.pool();
        this.skipL1 = skipL1;
        this.shapes = layouts.shapes();
        this.lookups = layouts.lookups();
        this.maxBacklogBytes = admission.maxBacklogBytes();
        this.gate = admission.gate();
        this.metrics = metrics;
        this.wake = wake;
        for (int i = 0; i < adapters.size(); i++) {
            inFlight.add(new HashMap<>());
        }
    }

    @Override
    public String roleName() {
        return "l2-store";
    }

    /** Runs on the committing thread under the object store's lock: only a bound check, a queue append and a wake-up. */
    @Override
    public boolean committed(StoredObject object, Keys keys) {
        Committed committed = new Committed(keys.keyOf(object), object);
        if (committed.key().hasTags()) {
            return false; // L2 names carry no tags: LMCache refuses a tagged store on such adapters (request_tags.rst)
        }
        long bytes = committed.object().bytes();
        if (gate.onCommit(committed.key(), bytes) != L2WriteGate.Decision.ADMITTED) {
            return false; // counted by the gate; an L1 hit may still admit it later (admitOnLookup)
        }
        if (heldBytes.addAndGet(bytes) > maxBacklogBytes) {
            heldBytes.addAndGet(-bytes);
            metrics.storeSkippedObjects.increment();
            return false;
        }
        pending.add(new Write(committed, adapters.size()));
        pendingKeys.incrementAndGet();
        wake.run();
        return true;
    }

    /** {@code --l2-store-policy full_attention_only}; set before the first STORE. */
    public void fullAttentionOnly(boolean on) {
        this.fullAttentionOnly = on;
    }

    /**
     * The window commit's copies (LMCache's {@code StoreController.submit_flush}, design 69066784989 "Execution"): objects the
     * caller pinned in L1 (one hold each, given back here), written to every adapter past the store policy and kept in L1. Past the
     * backlog bound the rest are given back, counted. Returns the objects taken. Runs on the END_SESSION handler's thread: only a
     * bound check, queue appends and a wake-up, as {@link #committed}.
     */
    public int flush(List<Committed> pinned) {
        int taken = enqueuePinned(pinned, metrics.storeFlushSkipped);
        metrics.storeFlushedObjects.add(taken);
        return taken;
    }

    /**
     * Objects a LOOKUP found in L1 that the {@link L2WriteGate} admitted on that sighting (turned away at their STORE), pinned by
     * the caller (one hold each, given back here): written as a window commit's copies are, kept in L1. Past the backlog bound
     * the rest are given back, counted. Runs on the LOOKUP's thread: a bound check, queue appends and a wake-up.
     */
    public void admitOnLookup(List<Committed> pinned) {
        enqueuePinned(pinned, metrics.storeSkippedObjects);
    }

    /**
     * Queues objects the caller pinned as copies that stay in L1 (a window commit's, or a LOOKUP's that is reading them); past
     * the backlog bound the rest are given back and counted in {@code skipped}. Returns the objects taken, and wakes the thread.
     */
    private int enqueuePinned(List<Committed> pinned, LongAdder skipped) {
        int taken = 0;
        for (Committed c : pinned) {
            long bytes = c.object().bytes();
            if (heldBytes.addAndGet(bytes) > maxBacklogBytes) {
                heldBytes.addAndGet(-bytes);
                store.unpin(c.object(), false);
                skipped.increment();
                continue;
            }
            Write write = new Write(c, adapters.size());
            write.flush = true;
            pending.add(write);
            pendingKeys.incrementAndGet();
            taken++;
        }
        if (taken > 0) {
            wake.run();
        }
        return taken;
    }

    @Override
    public int doWork() {
        return submitPending() + collectCompleted();
    }

    private int submitPending() {
        Map<Shape, List<Write>> groups = new LinkedHashMap<>();
        int taken = 0;
        for (Write write = pending.poll(); write != null; write = pending.poll()) {
            pendingKeys.decrementAndGet();
            Committed c = write.committed;
            Shape shape = new Shape(c.model(), c.kvRank(), c.group(), c.object().bytes(), c.object().format());
            groups.computeIfAbsent(shape, s -> new ArrayList<>()).add(write);
            taken++;
        }
        for (Map.Entry<Shape, List<Write>> entry : groups.entrySet()) {
            List<Write> group = entry.getValue();
            if (!keyed(entry.getKey(), group)) {
                continue;
            }
            for (int from = 0; from < group.size(); from += MAX_TASK_OBJECTS) {
                List<Write> batch = group.subList(from, Math.min(group.size(), from + MAX_TASK_OBJECTS));
                List<L2Key> keys = new ArrayList<>(batch.size());
                List<MemorySegment> objects = new ArrayList<>(batch.size());
                for (Write write : batch) {
                    StoredObject object = write.committed.object();
                    keys.add(write.key);
                    objects.add(pool.asSlice(object.offset(), object.bytes()));
                }
                // the default store policy: every object to every adapter
                for (int a = 0; a < adapters.size(); a++) {
                    long submittedNs = System.nanoTime();
                    long taskId = adapters.get(a).submitStore(keys, objects);
                    inFlight.get(a).put(taskId, new Task(List.copyOf(batch), submittedNs));
                    metrics.adapter(a).inflightStores().incrementAndGet();
                    metrics.storeSubmitted.increment();
                    countBySalt(metrics.storeSubmittedObjects, batch);
                }
                processingKeys += batch.size();
            }
        }
        return taken;
    }

    /** Gives the group's writes their L2 keys, or, when the world size that wrote them cannot be told, gives their holds back. */
    private boolean keyed(Shape shape, List<Write> group) {
        int worldSize = shapes.worldSizeOf(shape.model(), shape.kvRank(), shape.group(), shape.bytes(), shape.format());
        if (worldSize <= 0 || worldSize > L2Key.MAX_WORLD_SIZE) {
            (worldSize == ObjectShapes.AMBIGUOUS ? metrics.storeAmbiguousLayout : metrics.storeNoLayout).add(group.size());
            for (Write write : group) {
                store.unpin(write.committed.object(), false);
                heldBytes.addAndGet(-write.committed.object().bytes());
            }
            return false;
        }
        if (fullAttentionOnly && lookups.slidingWindow(shape.model(), worldSize, shape.group())) {
            keepWindowInL1(group);
            if (group.isEmpty()) {
                return false;
            }
        }
        int kvRank = L2Key.packKvRank(worldSize, shape.kvRank());
        // a LOOKUP loads from L2 only for a plain geometry and a single object group (PrefetchController refuses several)
        List<ObjectShape> registered = shapes.shapes(shape.model(), worldSize);
        boolean mayLeaveL1 = skipL1 && lookups.consultsL2(shape.model(), worldSize) && registered != null && registered.size() == 1;
        ObjectShape objectShape = registeredShape(registered, shape);
        for (Write write : group) {
            Committed c = write.committed;
            write.key = L2Keys.of(c.model(), kvRank, c.key().hash(), c.salt(), objectShape);
            write.mayLeaveL1 = mayLeaveL1 && !write.flush;
        }
        return true;
    }

    /** The registered shape the objects are of (worldSizeOf found one); a plain one if the registration is gone since. */
    private static ObjectShape registeredShape(List<ObjectShape> registered, Shape shape) {
        if (registered != null) {
            for (ObjectShape candidate : registered) {
                if (candidate.objectGroup() == shape.group() && candidate.objectBytes() == shape.bytes() && candidate.format() == shape.format()) {
                    return candidate;
                }
            }
        }
        return new ObjectShape(shape.group(), shape.bytes(), shape.format());
    }

    /** full_attention_only: the write-through's sliding-window objects stay in L1 (their holds go back); a window commit's go on. */
    private void keepWindowInL1(List<Write> group) {
        int kept = 0;
        for (int i = 0; i < group.size(); i++) {
            Write write = group.get(i);
            if (write.flush) {
                group.set(kept++, write);
            } else {
                store.unpin(write.committed.object(), false);
                heldBytes.addAndGet(-write.committed.object().bytes());
                metrics.storeSlidingWindow.increment();
            }
        }
        group.subList(kept, group.size()).clear();
    }

    private int collectCompleted() {
        int done = 0;
        for (int a = 0; a < adapters.size(); a++) {
            for (Map.Entry<Long, StoreResult> entry : adapters.get(a).popCompletedStores().entrySet()) {
                Task task = inFlight.get(a).remove(entry.getKey());
                if (task == null) {
                    continue; // not ours: cannot happen with one controller per adapter, kept harmless
                }
                done++;
                completed(a, entry.getValue(), task);
            }
        }
        return done;
    }

    private void completed(int adapter, StoreResult result, Task task) {
        List<Write> writes = task.writes();
        // holds go back before the counters move: whoever waits on a counter finds the objects released
        for (Write write : writes) {
            write.allOk &= result.ok();
            if (--write.remaining == 0) {
                release(write);
            }
        }
        L2Metrics.Adapter counters = metrics.adapter(adapter);
        counters.inflightStores().decrementAndGet();
        if (result.ok()) {
            counters.storeCompleted().increment();
            counters.storeBytes().add(result.bytesTransferred());
            // bytes actually written: a task whose keys were all there already gives no sample
            counters.storeThroughput().record(result.bytesTransferred(), System.nanoTime() - task.submittedNs());
            countBySalt(metrics.storeCompletedObjects, writes);
        } else {
            counters.storeFailed().increment();
            countBySalt(metrics.storeFailedObjects, writes);
            failedTasks.increment();
            failedKeys.add(writes.size());
            logFailure(adapter, writes.size());
        }
    }

    /** Counts {@code writes} under their cache salts: one series update per salt (a task's objects mostly share one). */
    private static void countBySalt(L2Metrics.Family family, List<Write> writes) {
        String first = writes.getFirst().committed.salt();
        int same = 0;
        Map<String, Integer> others = null;
        for (Write write : writes) {
            if (write.committed.salt().equals(first)) {
                same++;
            } else {
                if (others == null) {
                    others = new HashMap<>();
                }
                others.merge(write.committed.salt(), 1, Integer::sum);
            }
        }
        family.add(first, same);
        if (others != null) {
            others.forEach(family::add);
        }
    }

    /** Every adapter answered: the read hold goes back, and under skip_l1 an object all of them stored leaves L1 if L2 can serve it. */
    private void release(Write write) {
        StoredObject object = write.committed.object();
        processingKeys--;
        store.unpin(object, false);
        heldBytes.addAndGet(-object.bytes());
        if (skipL1 && write.allOk) {
            if (write.mayLeaveL1) {
                store.dropIfIdle(object);
            } else {
                keptInL1.increment(); // its LOOKUP reads L1 alone (a hybrid model): dropped, it could never hit again
            }
        }
    }

    private void logFailure(int adapter, int keys) {
        long nowNs = System.nanoTime();
        if (!failureLogged || nowNs - lastFailureLogNs - FAILURE_LOG_INTERVAL_NS > 0) {
            LOG.warn("L2 adapter #{} ({}) failed a store of {} object(s); not retried, the objects stay in L1 ({} failed task(s) so far; "
                    + "its /status entry has the cause)", adapter, adapters.get(adapter).typeName(), keys, failedTasks.sum());
            failureLogged = true;
            lastFailureLogNs = nowNs;
        }
    }

    /** Gives back the holds of writes that will never be answered (the agent stops before its adapters close). */
    @Override
    public void onClose() {
        for (Write write = pending.poll(); write != null; write = pending.poll()) {
            store.unpin(write.committed.object(), false);
        }
    }

    /** {@code /status} {@code storage_manager.store_controller}; read on lmcache-http-* from counters only. */
    public Map<String, Object> status() {
        Map<String, Object> status = new LinkedHashMap<>();
        status.put("is_healthy", true);
        status.put("store_policy", skipL1 ? "skip_l1" : fullAttentionOnly ? "full_attention_only" : "default");
        status.put("pending_keys_count", pendingKeys.get());
        status.put("processing_keys_count", processingKeys);
        int tasks = 0;
        for (int a = 0; a < adapters.size(); a++) {
            tasks += metrics.adapter(a).inflightStores().get();
        }
        status.put("in_flight_task_count", tasks);
        status.put("failed_task_count", failedTasks.sum());
        status.put("failed_key_count", failedKeys.sum());
        status.put("skip_l1_kept_key_count", keptInL1.sum());
        status.put("sliding_window_kept_key_count", (long) metrics.storeSlidingWindow.sum());
        status.put("flushed_key_count", (long) metrics.storeFlushedObjects.sum());
        status.put("held_bytes", heldBytes.get());
        status.put("max_held_bytes", maxBacklogBytes);
        status.put("admission", gate.status());
        return status;
    }
}
