package io.lmcache.server.l2;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The asynchronous skeleton of every adapter, written once (LMCache's adapter base class): task ids and one-shot results
 * ({@link TaskResults}), completion signals, per-key bitmaps and store outcomes ({@link KeyBitsTask}, {@link StoreTask}), the
 * lookup locks, the byte accounting and listeners ({@link AdapterLedger}), delete that skips locked keys, and close. The per-key
 * I/O is an {@link AdapterIo}: a new type writes only that and its {@link L2AdapterType}.
 */
public final class AsyncL2Adapter implements L2Adapter {
    private static final Logger LOG = LoggerFactory.getLogger(AsyncL2Adapter.class);
    /** delete() runs on the caller's thread (L2 eviction): it waits this long for the answers; later ones still count. */
    private static final long DELETE_WAIT_NS = TimeUnit.MILLISECONDS.toNanos(500);

    private final AdapterIo io;
    private final AdapterLedger ledger;
    private final boolean persistEnabled;
    private final TaskResults results = new TaskResults();

    /**
     * @param ledger the one {@code io} was opened over
     * @param persistEnabled false: close removes what this process wrote or read
     */
    public AsyncL2Adapter(AdapterIo io, AdapterLedger ledger, boolean persistEnabled) {
        this.io = io;
        this.ledger = ledger;
        this.persistEnabled = persistEnabled;
    }

    /** The I/O it drives (tests reach their adapter's hooks through it). */
    public AdapterIo io() {
        return io;
    }

    @Override
    public String typeName() {
        return io.typeName();
    }

    @Override
    public void setCompletionSignals(CompletionSignals signals) {
        results.setSignals(signals);
    }

    /** A refused task answers at once; {@code accepts} is asked first so the I/O can count why. */
    private boolean refused(AdapterIo.Op op, int keys) {
        return !io.accepts(op, keys) || ledger.closed();
    }

    // --- store ---------------------------------------------------------------------------------

    @Override
    public long submitStore(List<L2Key> keys, List<MemorySegment> objects) {
        long taskId = results.newTaskId();
        List<L2Key> taskKeys = List.copyOf(keys);
        StoreTask task = new StoreTask(taskKeys.size(), result -> results.storeDone(taskId, result));
        if (refused(AdapterIo.Op.STORE, taskKeys.size())) {
            task.failed();
            taskKeys.forEach(key -> task.oneDone());
        } else {
            for (int i = 0; i < taskKeys.size(); i++) {
                L2Key key = taskKeys.get(i);
                long bytes = objects.get(i).byteSize();
                io.store(key, objects.get(i), stored -> {
                    if (stored == AdapterIo.Stored.FAILED) {
                        task.failed();
                    } else {
                        ledger.stored(key, bytes);
                        if (stored == AdapterIo.Stored.WROTE) {
                            task.wrote(bytes);
                        }
                    }
                    task.oneDone();
                });
            }
        }
        task.submitted();
        return taskId;
    }

    @Override
    public Map<Long, StoreResult> popCompletedStores() {
        return results.popStores();
    }

    // --- lookup and lock -----------------------------------------------------------------------

    @Override
    public long submitLookupAndLock(List<L2Key> keys, Map<Integer, Long> objectBytesByGroup) {
        long taskId = results.newTaskId();
        List<L2Key> taskKeys = List.copyOf(keys);
        KeyBitsTask task = new KeyBitsTask(taskKeys.size(), found -> results.lookupDone(taskId, found));
        if (refused(AdapterIo.Op.LOOKUP, taskKeys.size())) {
            taskKeys.forEach(key -> task.oneDone());
        } else {
            // the lock comes first: an eviction between the check and the lock could remove a key reported found
            taskKeys.forEach(ledger::lock);
            io.lookup(taskKeys, Map.copyOf(objectBytesByGroup), (index, hit) -> {
                if (hit) {
                    task.set(index);
                } else {
                    ledger.unlock(taskKeys.get(index));
                }
                task.oneDone();
            });
        }
        task.submitted();
        return taskId;
    }

    @Override
    public Bitmap queryLookupAndLock(long taskId) {
        return results.takeLookup(taskId);
    }

    /** Done inline: a map update cannot fail, so the unlock is never lost. */
    @Override
    public void submitUnlock(List<L2Key> keys) {
        ledger.unlockAll(keys);
    }

    // --- load ----------------------------------------------------------------------------------

    @Override
    public long submitLoad(List<L2Key> keys, List<MemorySegment> buffers) {
        long taskId = results.newTaskId();
        List<L2Key> taskKeys = List.copyOf(keys);
        List<MemorySegment> taskBuffers = List.copyOf(buffers);
        KeyBitsTask task = new KeyBitsTask(taskKeys.size(), loaded -> results.loadDone(taskId, loaded));
        if (refused(AdapterIo.Op.LOAD, taskKeys.size())) {
            taskKeys.forEach(key -> task.oneDone());
        } else {
            io.load(taskKeys, taskBuffers, (index, hit) -> {
                if (hit) {
                    task.set(index);
                    ledger.loaded(taskKeys.get(index), taskBuffers.get(index).byteSize());
                }
                task.oneDone();
            });
        }
        task.submitted();
        return taskId;
    }

    @Override
    public Bitmap queryLoad(long taskId) {
        return results.takeLoad(taskId);
    }

    // --- delete, usage, status, close ------------------------------------------------------------

    /**
     * Deletes the keys no lookup holds, waiting at most {@link #DELETE_WAIT_NS} for the answers; returns those removed, in the
     * order given. A key gone already is no longer counted either, so eviction never keeps choosing it.
     */
    @Override
    public List<L2Key> delete(List<L2Key> keys) {
        List<L2Key> unlocked = keys.stream().filter(key -> !ledger.isLocked(key)).toList();
        Set<L2Key> removed = ConcurrentHashMap.newKeySet();
        CountDownLatch answered = new CountDownLatch(unlocked.size());
        for (L2Key key : unlocked) {
            io.delete(key, deleted -> {
                if (deleted != AdapterIo.Deleted.FAILED) {
                    ledger.forget(key);
                }
                if (deleted == AdapterIo.Deleted.REMOVED) {
                    removed.add(key);
                }
                answered.countDown();
            });
        }
        try {
            answered.await(DELETE_WAIT_NS, TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return unlocked.stream().filter(removed::contains).toList();
    }

    /** Straight to the I/O: a listing reads the storage, never the key locks or the ledger. */
    @Override
    public KeyPage listKeys(String model, int pageSize, String cursor) {
        if (pageSize < 1) {
            throw new IllegalArgumentException("page_size must be >= 1");
        }
        return io.listKeys(model, pageSize, cursor);
    }

    @Override
    public AdapterUsage usage() {
        return ledger.usage();
    }

    @Override
    public void registerListener(L2AdapterListener listener) {
        ledger.register(listener);
    }

    @Override
    public Map<String, Long> eventCounts() {
        return io.eventCounts();
    }

    @Override
    public Map<String, Object> status() {
        return io.status();
    }

    /**
     * New tasks are refused from the first line on; the I/O then finishes or abandons (bounded) what is in flight, after which no
     * buffer is touched; with persist_enabled false the keys this process wrote or read are deleted; then the I/O is freed. A
     * second close does nothing.
     */
    @Override
    public void close() {
        if (!ledger.markClosed()) {
            return;
        }
        io.drain();
        if (!persistEnabled) {
            ledger.clearLocks();
            int removed = delete(ledger.knownKeys()).size();
            LOG.info("{}: persist_enabled is false: deleted the {} key(s) this process wrote or read", io.typeName(), removed);
        }
        io.release();
    }
}
