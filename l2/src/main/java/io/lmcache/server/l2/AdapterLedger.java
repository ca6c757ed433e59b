package io.lmcache.server.l2;

import java.util.List;

/**
 * The part of an adapter's skeleton its I/O sees ({@link AsyncL2Adapter} keeps the rest): the key locks, the byte accounting
 * and its listeners, and whether the adapter is closing. Thread-safe.
 */
public final class AdapterLedger {
    private final UsageAccounting accounting;
    private final KeyLocks locks = new KeyLocks();
    private volatile boolean closed;

    public AdapterLedger(long capacityBytes) {
        this.accounting = new UsageAccounting(capacityBytes);
    }

    /** Files of earlier runs that {@link #found} added to the usage. */
    public record Found(int files, long bytes) {}

    public AdapterUsage usage() {
        return accounting.usage();
    }

    /** Keys locked by lookups and not yet unlocked (for status). */
    public int lockedKeys() {
        return locks.lockedKeys();
    }

    /** Set as close begins: new tasks are refused from then on. */
    public boolean closed() {
        return closed;
    }

    /** The storage lost the key by itself (a short file removed): no longer counted, listeners told. */
    public void forget(L2Key key) {
        accounting.deleted(List.of(key));
    }

    /** Keys an earlier process left, oldest first: counted as older than anything this process touched ({@link UsageAccounting#found}). */
    public Found found(List<L2Key> keys, long[] objectSizes) {
        return accounting.found(keys, objectSizes);
    }

    // --- the skeleton's side -------------------------------------------------------------------

    /** False when it was closed already. */
    synchronized boolean markClosed() {
        boolean first = !closed;
        closed = true;
        return first;
    }

    void lock(L2Key key) {
        locks.lock(key);
    }

    void unlock(L2Key key) {
        locks.unlock(key);
    }

    void unlockAll(List<L2Key> keys) {
        locks.unlockAll(keys);
    }

    boolean isLocked(L2Key key) {
        return locks.isLocked(key);
    }

    void clearLocks() {
        locks.clear();
    }

    void stored(L2Key key, long bytes) {
        accounting.stored(List.of(key), new long[] {bytes});
    }

    void loaded(L2Key key, long bytes) {
        stored(key, bytes);
        accounting.accessed(List.of(key));
    }

    void register(L2AdapterListener listener) {
        accounting.register(listener);
    }

    List<L2Key> knownKeys() {
        return accounting.knownKeys();
    }
}
