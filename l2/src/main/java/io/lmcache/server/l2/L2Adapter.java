package io.lmcache.server.l2;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;

/**
 * The L2 adapter contract (hybrid-and-l2.md §B.2, LMCache's {@code L2AdapterInterface}): moves the
 * bytes of keys it is given to and from one storage, asynchronously. It knows nothing of L1: the
 * caller owns every buffer and keeps it alive (L1 locks) until the task's result is taken.
 *
 * <p>Every method is thread-safe and never blocks on I/O; results come back through the matching
 * {@link CompletionSignals signal} and a query. Task ids are unique per adapter. Results are
 * one-shot: a query answers null while the task runs, then its result exactly once, then null.
 * Stores succeed or fail per task, lookups and loads per key (bit i answers for {@code keys[i]}).
 * An unlock cannot fail: the adapter sees it through.
 */
public interface L2Adapter extends AutoCloseable {
    /** The implementation's name as status and the fault_inject banner show it (e.g. {@code FSNativeL2Adapter}). */
    String typeName();

    /** Where completions are signalled; set once, before the first task. */
    void setCompletionSignals(CompletionSignals signals);

    /** Starts writing {@code objects[i]} under {@code keys[i]}; the caller holds the buffers until the result is popped. */
    long submitStore(List<L2Key> keys, List<MemorySegment> objects);

    /** Every store task finished since the last call, each once. */
    Map<Long, StoreResult> popCompletedStores();

    /**
     * Starts checking which keys exist and locks those found against deletion until {@link #submitUnlock}.
     *
     * @param objectBytesByGroup the expected size of an object per object group (a stored object of another size is not found);
     *     a group that is absent is not checked
     */
    long submitLookupAndLock(List<L2Key> keys, Map<Integer, Long> objectBytesByGroup);

    /** The found-and-locked bitmap once the lookup finished (once), else null. */
    Bitmap queryLookupAndLock(long taskId);

    /** Releases one lock per key taken by a lookup; fire and forget. */
    void submitUnlock(List<L2Key> keys);

    /** Starts reading {@code keys[i]} into {@code buffers[i]}, which have the object's exact size. */
    long submitLoad(List<L2Key> keys, List<MemorySegment> buffers);

    /** The loaded-in-full bitmap once the load finished (once), else null. */
    Bitmap queryLoad(long taskId);

    /** Removes the keys that are neither locked nor being written; returns the keys removed. The default removes nothing. */
    default List<L2Key> delete(List<L2Key> keys) {
        return List.of();
    }

    /**
     * A page of the keys resident in the adapter (LMCache's {@code list_l2_keys}), for the operator's {@code GET /cache/objects}:
     * {@code model} null lists every model; {@code cursor} null starts, else it is a {@link KeyPage#nextCursor} this adapter gave.
     * Blocking (a directory walk, a SCAN): never call it on a controller thread. Throws {@link UnsupportedOperationException}
     * when the adapter cannot list (the default), {@link IllegalArgumentException} for a cursor it never gave.
     */
    default KeyPage listKeys(String model, int pageSize, String cursor) {
        throw new UnsupportedOperationException(typeName() + " cannot list its keys");
    }

    AdapterUsage usage();

    /** Whether L2 eviction can bound this adapter by bytes (it knows its capacity). */
    default boolean supportsGlobalEviction() {
        return usage().totalCapacityBytes() > 0;
    }

    void registerListener(L2AdapterListener listener);

    /**
     * Counters of the adapter's own events (e.g. a Redis node's circuit breaker opening), by a fixed set of names: the server exports
     * each as {@code lmcache_mp_l2_adapter_events_total{event}}. The default has none.
     */
    default Map<String, Long> eventCounts() {
        return Map.of();
    }

    /** The adapter's {@code /status} entry; always has {@code is_healthy}. */
    Map<String, Object> status();

    /** Finishes or abandons (bounded) the tasks in flight and frees the adapter's threads and files. */
    @Override
    void close();
}
