package io.lmcache.server.tier;

import io.lmcache.server.l2.AdapterUsage;
import io.lmcache.server.l2.Bitmap;
import io.lmcache.server.l2.CompletionSignals;
import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2AdapterListener;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.l2.StoreResult;
import io.lmcache.server.l2.TaskResults;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * An in-memory adapter for the controllers' tests: answers at once (or, for stores, lookups and loads, when told: a held task does
 * nothing until released), and records what it was asked.
 */
final class MemoryAdapter implements L2Adapter {
    final Map<L2Key, byte[]> data = new ConcurrentHashMap<>();
    final Map<L2Key, Integer> locks = new ConcurrentHashMap<>();
    final List<List<L2Key>> unlocks = new ArrayList<>();
    final Set<L2Key> failingLoads = new HashSet<>();
    boolean failStores;
    boolean holdStores;
    boolean holdLookups;
    /** While set, a submitted load neither writes nor answers until {@link #releaseLoads} (it stays in flight). */
    boolean holdLoads;
    int storeTasks;
    int lookupTasks;
    int loadTasks;
    private final TaskResults results = new TaskResults();
    private final List<Runnable> heldStores = new ArrayList<>();
    private final List<Runnable> heldLookups = new ArrayList<>();
    private final List<Runnable> heldLoads = new ArrayList<>();

    @Override
    public String typeName() {
        return "MemoryAdapter";
    }

    @Override
    public void setCompletionSignals(CompletionSignals signals) {
        results.setSignals(signals);
    }

    @Override
    public synchronized long submitStore(List<L2Key> keys, List<MemorySegment> objects) {
        long id = results.newTaskId();
        storeTasks++;
        Runnable complete = () -> {
            if (!failStores) {
                for (int i = 0; i < keys.size(); i++) {
                    data.put(keys.get(i), objects.get(i).toArray(ValueLayout.JAVA_BYTE));
                }
            }
            results.storeDone(id, new StoreResult(!failStores, failStores ? 0 : objects.stream().mapToLong(MemorySegment::byteSize).sum()));
        };
        if (holdStores) {
            heldStores.add(complete);
        } else {
            complete.run();
        }
        return id;
    }

    synchronized void releaseStores() {
        heldStores.forEach(Runnable::run);
        heldStores.clear();
    }

    @Override
    public Map<Long, StoreResult> popCompletedStores() {
        return results.popStores();
    }

    synchronized void releaseLookups() {
        heldLookups.forEach(Runnable::run);
        heldLookups.clear();
    }

    synchronized void releaseLoads() {
        heldLoads.forEach(Runnable::run);
        heldLoads.clear();
    }

    @Override
    public synchronized long submitLookupAndLock(List<L2Key> keys, Map<Integer, Long> objectBytesByGroup) {
        long id = results.newTaskId();
        lookupTasks++;
        Runnable complete = () -> {
            Bitmap found = new Bitmap(keys.size());
            for (int i = 0; i < keys.size(); i++) {
                byte[] bytes = data.get(keys.get(i));
                if (bytes != null && bytes.length == objectBytesByGroup.get(keys.get(i).objectGroup())) {
                    found.set(i);
                    locks.merge(keys.get(i), 1, Integer::sum);
                }
            }
            results.lookupDone(id, found);
        };
        if (holdLookups) {
            heldLookups.add(complete);
        } else {
            complete.run();
        }
        return id;
    }

    @Override
    public Bitmap queryLookupAndLock(long taskId) {
        return results.takeLookup(taskId);
    }

    @Override
    public synchronized void submitUnlock(List<L2Key> keys) {
        unlocks.add(List.copyOf(keys));
        keys.forEach(key -> locks.computeIfPresent(key, (k, count) -> count <= 1 ? null : count - 1));
    }

    @Override
    public synchronized long submitLoad(List<L2Key> keys, List<MemorySegment> buffers) {
        long id = results.newTaskId();
        loadTasks++;
        Runnable complete = () -> {
            Bitmap loaded = new Bitmap(keys.size());
            for (int i = 0; i < keys.size(); i++) {
                byte[] bytes = data.get(keys.get(i));
                if (bytes != null && !failingLoads.contains(keys.get(i))) {
                    MemorySegment.copy(bytes, 0, buffers.get(i), ValueLayout.JAVA_BYTE, 0, bytes.length);
                    loaded.set(i);
                }
            }
            results.loadDone(id, loaded);
        };
        if (holdLoads) {
            heldLoads.add(complete);
        } else {
            complete.run();
        }
        return id;
    }

    @Override
    public Bitmap queryLoad(long taskId) {
        return results.takeLoad(taskId);
    }

    @Override
    public AdapterUsage usage() {
        return new AdapterUsage(0, 0, Map.of());
    }

    @Override
    public void registerListener(L2AdapterListener listener) {
    }

    @Override
    public Map<String, Object> status() {
        return Map.of("is_healthy", true);
    }

    @Override
    public void close() {
    }
}
