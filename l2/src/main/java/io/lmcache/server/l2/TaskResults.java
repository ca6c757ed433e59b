package io.lmcache.server.l2;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One adapter's task ids and finished results, kept until taken, each exactly once (the contract's
 * one-shot rule), and the completion signals fired as each result lands. Thread-safe.
 */
final class TaskResults {
    private final AtomicLong nextId = new AtomicLong(1);
    private final Map<Long, StoreResult> stores = new HashMap<>();
    private final Map<Long, Bitmap> lookups = new ConcurrentHashMap<>();
    private final Map<Long, Bitmap> loads = new ConcurrentHashMap<>();
    private volatile CompletionSignals signals = CompletionSignals.NONE;

    public long newTaskId() {
        return nextId.getAndIncrement();
    }

    public void setSignals(CompletionSignals signals) {
        this.signals = signals;
    }

    public void storeDone(long taskId, StoreResult result) {
        synchronized (stores) {
            stores.put(taskId, result);
        }
        signals.storeDone().run();
    }

    public void lookupDone(long taskId, Bitmap found) {
        lookups.put(taskId, found);
        signals.lookupDone().run();
    }

    public void loadDone(long taskId, Bitmap loaded) {
        loads.put(taskId, loaded);
        signals.loadDone().run();
    }

    public Map<Long, StoreResult> popStores() {
        synchronized (stores) {
            if (stores.isEmpty()) {
                return Map.of();
            }
            Map<Long, StoreResult> out = new HashMap<>(stores);
            stores.clear();
            return out;
        }
    }

    public Bitmap takeLookup(long taskId) {
        return lookups.remove(taskId);
    }

    public Bitmap takeLoad(long taskId) {
        return loads.remove(taskId);
    }
}
