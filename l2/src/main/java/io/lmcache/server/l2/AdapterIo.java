package io.lmcache.server.l2;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * What an adapter type writes: its per-key I/O (store, lookup, load, delete) and its status. {@link AsyncL2Adapter} drives it and
 * owns the rest of the contract: task ids, one-shot results, key locks, per-key bitmaps, usage accounting, listeners and
 * completion signals ({@link AdapterLedger} is the part the I/O sees).
 *
 * <p>Every key handed over is answered exactly once, on any thread, without blocking the caller: a failure is an answer too. A
 * buffer is the caller's and is read or written only until its key is answered. Lookups and loads take a task's keys together
 * (one pass over them may answer all; a decorator sees their positions). No method throws.
 */
public interface AdapterIo {
    /** The kinds of task. */
    enum Op { STORE, LOOKUP, LOAD }

    /** A key's store: written (its bytes count), there already with this size (ok, nothing written), or failed (the task fails). */
    enum Stored { WROTE, EXISTED, FAILED }

    /** A key's delete: removed, gone already (no longer counted either way), or failed (still counted). */
    enum Deleted { REMOVED, GONE, FAILED }

    /** The answers of a lookup or load: {@code hit} for {@code keys[index]}; each index once. */
    @FunctionalInterface
    interface KeyAnswers {
        void answer(int index, boolean hit);
    }

    /** The implementation's name as status and the fault_inject banner show it (e.g. {@code FSNativeL2Adapter}). */
    String typeName();

    /**
     * Whether a new task of {@code keys} keys can go out now (called once per task, before any of its keys): a task refused
     * answers at once, a store as failed, a lookup or load as all misses. The default takes every task.
     */
    default boolean accepts(Op op, int keys) {
        return true;
    }

    /** Writes {@code object} under {@code key}. */
    void store(L2Key key, MemorySegment object, Consumer<Stored> done);

    /**
     * Answers which keys are stored (the skeleton holds their locks meanwhile and releases those of the misses).
     *
     * @param objectBytesByGroup the expected size of an object per object group; a group that is absent is not checked
     */
    void lookup(List<L2Key> keys, Map<Integer, Long> objectBytesByGroup, KeyAnswers found);

    /** Reads {@code keys[i]} into {@code buffers[i]}, which has the object's exact size; another size is a miss. */
    void load(List<L2Key> keys, List<MemorySegment> buffers, KeyAnswers loaded);

    /** Removes {@code key} (the skeleton never asks for a locked one). */
    void delete(L2Key key, Consumer<Deleted> done);

    /** {@link L2Adapter#listKeys}: the default cannot list. May block; may throw as that method says. */
    default KeyPage listKeys(String model, int pageSize, String cursor) {
        throw new UnsupportedOperationException(typeName() + " cannot list its keys");
    }

    /** The adapter's {@code /status} entry; always has {@code is_healthy}. */
    Map<String, Object> status();

    /** Counters of the adapter's own events, by a fixed set of names ({@link L2Adapter#eventCounts}). */
    default Map<String, Long> eventCounts() {
        return Map.of();
    }

    /**
     * Close, first step (the ledger says closed already, so new tasks are refused): finish or abandon, bounded, what is in flight;
     * once it returns no buffer handed over is touched again. Deletes still work after it (persist_enabled false removes keys next).
     */
    void drain();

    /** Close, last step: frees the threads, connections and files. */
    default void release() {
    }
}
