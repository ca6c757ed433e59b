package io.lmcache.server.tier;

import io.lmcache.server.l2.AdapterIo;
import io.lmcache.server.l2.AdapterLedger;
import io.lmcache.server.l2.AdapterUsage;
import io.lmcache.server.l2.AsyncL2Adapter;
import io.lmcache.server.l2.Bitmap;
import io.lmcache.server.l2.CompletionSignals;
import io.lmcache.server.l2.L2Adapter;
import io.lmcache.server.l2.L2AdapterListener;
import io.lmcache.server.l2.L2Key;
import io.lmcache.server.l2.StoreResult;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * An in-memory adapter for the controllers' tests, on the adapters' one skeleton ({@link AsyncL2Adapter}; it keeps the contract,
 * MemoryAdapterContractTest): answers at once (or, for stores, lookups and loads, when told: a held task does nothing until
 * released), and records what it was asked.
 */
final class MemoryAdapter implements L2Adapter {
    final Map<L2Key, byte[]> data = new ConcurrentHashMap<>();
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
    private final List<Runnable> heldStores = new ArrayList<>();
    private final List<Runnable> heldLookups = new ArrayList<>();
    private final List<Runnable> heldLoads = new ArrayList<>();
    private final AdapterLedger ledger = new AdapterLedger(0);
    private final AsyncL2Adapter adapter = new AsyncL2Adapter(new Memory(), ledger, true);

    /** Keys locked by lookups and not unlocked yet. */
    int lockedKeys() {
        return ledger.lockedKeys();
    }

    synchronized void releaseStores() {
        heldStores.forEach(Runnable::run);
        heldStores.clear();
    }

    synchronized void releaseLookups() {
        heldLookups.forEach(Runnable::run);
        heldLookups.clear();
    }

    synchronized void releaseLoads() {
        heldLoads.forEach(Runnable::run);
        heldLoads.clear();
    }

    private synchronized void runOrHold(boolean hold, List<Runnable> held, Runnable complete) {
        if (hold) {
            held.add(complete);
        } else {
            complete.run();
        }
    }

    /** The bytes in a map; every answer on the submitting thread (or the releasing one). */
    private final class Memory implements AdapterIo {
        @Override
        public String typeName() {
            return "MemoryAdapter";
        }

        @Override
        public boolean accepts(Op op, int keys) {
            synchronized (MemoryAdapter.this) {
                switch (op) {
                    case STORE -> storeTasks++;
                    case LOOKUP -> lookupTasks++;
                    case LOAD -> loadTasks++;
                    default -> throw new IllegalArgumentException(op.name());
                }
            }
            return true;
        }

        @Override
        public void store(L2Key key, MemorySegment object, Consumer<Stored> done) {
            runOrHold(holdStores, heldStores, () -> {
                if (!failStores) {
                    data.put(key, object.toArray(ValueLayout.JAVA_BYTE));
                }
                done.accept(failStores ? Stored.FAILED : Stored.WROTE);
            });
        }

        @Override
        public void lookup(List<L2Key> keys, Map<Integer, Long> objectBytesByGroup, KeyAnswers found) {
            runOrHold(holdLookups, heldLookups, () -> {
                for (int i = 0; i < keys.size(); i++) {
                    byte[] bytes = data.get(keys.get(i));
                    Long expected = objectBytesByGroup.get(keys.get(i).objectGroup());
                    found.answer(i, bytes != null && (expected == null || bytes.length == expected));
                }
            });
        }

        @Override
        public void load(List<L2Key> keys, List<MemorySegment> buffers, KeyAnswers loaded) {
            runOrHold(holdLoads, heldLoads, () -> {
                for (int i = 0; i < keys.size(); i++) {
                    byte[] bytes = data.get(keys.get(i));
                    boolean hit = bytes != null && bytes.length == buffers.get(i).byteSize() && !failingLoads.contains(keys.get(i));
                    if (hit) {
                        MemorySegment.copy(bytes, 0, buffers.get(i), ValueLayout.JAVA_BYTE, 0, bytes.length);
                    }
                    loaded.answer(i, hit);
                }
            });
        }

        @Override
        public void delete(L2Key key, Consumer<Deleted> done) {
            done.accept(data.remove(key) != null ? Deleted.REMOVED : Deleted.GONE);
        }

        @Override
        public Map<String, Object> status() {
            return Map.of("is_healthy", true);
        }

        /** Held tasks are answered as they would have been: close finishes what is in flight. */
        @Override
        public void drain() {
            releaseStores();
            releaseLookups();
            releaseLoads();
        }
    }

    // --- the adapter, recording the unlocks --------------------------------------------------------

    @Override
    public String typeName() {
        return adapter.typeName();
    }

    @Override
    public void setCompletionSignals(CompletionSignals signals) {
        adapter.setCompletionSignals(signals);
    }

    @Override
    public long submitStore(List<L2Key> keys, List<MemorySegment> objects) {
        return adapter.submitStore(keys, objects);
    }

    @Override
    public Map<Long, StoreResult> popCompletedStores() {
        return adapter.popCompletedStores();
    }

    @Override
    public long submitLookupAndLock(List<L2Key> keys, Map<Integer, Long> objectBytesByGroup) {
        return adapter.submitLookupAndLock(keys, objectBytesByGroup);
    }

    @Override
    public Bitmap queryLookupAndLock(long taskId) {
        return adapter.queryLookupAndLock(taskId);
    }

    @Override
    public synchronized void submitUnlock(List<L2Key> keys) {
        unlocks.add(List.copyOf(keys));
        adapter.submitUnlock(keys);
    }

    @Override
    public long submitLoad(List<L2Key> keys, List<MemorySegment> buffers) {
        return adapter.submitLoad(keys, buffers);
    }

    @Override
    public Bitmap queryLoad(long taskId) {
        return adapter.queryLoad(taskId);
    }

    @Override
    public List<L2Key> delete(List<L2Key> keys) {
        return adapter.delete(keys);
    }

    @Override
    public AdapterUsage usage() {
        return adapter.usage();
    }

    @Override
    public void registerListener(L2AdapterListener listener) {
        adapter.registerListener(listener);
    }

    @Override
    public Map<String, Object> status() {
        return adapter.status();
    }

    @Override
    public void close() {
        adapter.close();
    }
}
