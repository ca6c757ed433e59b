package io.lmcache.server.tier.admission;

import io.lmcache.server.config.L2AdmissionSettings;
import io.lmcache.server.metrics.L2Metrics;
import io.lmcache.server.storage.ChunkKey;
import io.lmcache.server.storage.ChunkHash;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * The write-through's one admission decision: the {@code --l2-admission} policy, then the tenant's
 * {@code --l2-write-budget-bytes-per-second}. The write path asks {@link #onCommit} once per committed object; the LOOKUP path
 * tells {@link #onL1Hit} of the objects it found in L1, so an object turned away at its STORE is written once it has been seen
 * often enough. Each decision is counted in bytes ({@code lmcache_mp.l2_admission_bytes{decision}}). With {@code all} and no
 * budget it keeps no state and takes no lock. Thread-safe: a commit runs on the committing thread (under the store's lock), a
 * LOOKUP's hits on its thread; the sketch and buckets are guarded by this object.
 */
public final class L2WriteGate {
    /** Why a committed object was or was not sent. */
    public enum Decision {
        ADMITTED, SKIPPED, BUDGET_DROPPED
    }

    private final L2AdmissionSettings settings;
    private final L2Admission admission;
    private final WriteBudget budget;
    private final LongSupplier clockNs;
    private final boolean passThrough;
    private final LongAdder admittedBytes;
    private final LongAdder admittedOnLookupBytes;
    private final LongAdder skippedBytes;
    private final LongAdder budgetDroppedBytes;

    /** {@code expectedKeys}: about how many distinct objects the sketch should tell apart (the L1 pool's and more). */
    public L2WriteGate(L2AdmissionSettings settings, int expectedKeys, L2Metrics metrics, LongSupplier clockNs) {
        this.settings = settings;
        this.admission = L2Admission.create(settings, expectedKeys);
        this.budget = settings.writeBudgetBytesPerSecond() > 0 ? new WriteBudget(settings.writeBudgetBytesPerSecond()) : null;
        this.clockNs = clockNs;
        this.passThrough = settings.admitsAll() && budget == null;
        this.admittedBytes = metrics.admissionAdmittedBytes;
        this.admittedOnLookupBytes = metrics.admissionAdmittedOnLookupBytes;
        this.skippedBytes = metrics.admissionSkippedBytes;
        this.budgetDroppedBytes = metrics.admissionBudgetDroppedBytes;
    }

    /** A STORE committed {@code key}'s object of {@code bytes}: whether the write-through sends it. */
    public Decision onCommit(ChunkKey key, long bytes) {
        if (passThrough) {
            admittedBytes.add(bytes);
            return Decision.ADMITTED;
        }
        Decision decision;
        synchronized (this) {
            decision = !admission.onCommit(objectKey(key)) ? Decision.SKIPPED
                    : budget != null && !budget.take(key.salt(), bytes, clockNs.getAsLong()) ? Decision.BUDGET_DROPPED : Decision.ADMITTED;
        }
        count(decision, bytes, admittedBytes);
        return decision;
    }

    /** A LOOKUP found {@code key}'s object of {@code bytes} in L1: true when it is to be written now. */
    public boolean onL1Hit(ChunkKey key, long bytes) {
        if (settings.admitsAll()) {
            return false;
        }
        Decision decision;
        synchronized (this) {
            if (!admission.onL1Hit(objectKey(key))) {
                return false;
            }
            decision = budget != null && !budget.take(key.salt(), bytes, clockNs.getAsLong()) ? Decision.BUDGET_DROPPED : Decision.ADMITTED;
        }
        count(decision, bytes, admittedOnLookupBytes);
        return decision == Decision.ADMITTED;
    }

    /** Whether LOOKUPs need to report their L1 hits at all. */
    public boolean countsLookups() {
        return !settings.admitsAll();
    }

    private void count(Decision decision, long bytes, LongAdder admitted) {
        switch (decision) {
            case ADMITTED -> admitted.add(bytes);
            case SKIPPED -> skippedBytes.add(bytes);
            case BUDGET_DROPPED -> budgetDroppedBytes.add(bytes);
        }
    }

    /** An object's identity as one long: its chunk hash, kv rank, object group, model and salt (each rank's object counts apart). */
    static long objectKey(ChunkKey key) {
        ChunkHash hash = key.hash();
        long h = hash.w0() ^ Long.rotateLeft(hash.w1(), 17) ^ Long.rotateLeft(hash.w2(), 31) ^ Long.rotateLeft(hash.w3(), 47);
        h ^= ((long) key.kvRank() << 32) ^ key.group();
        h = h * 31 + key.model().hashCode();
        return h * 31 + key.salt().hashCode();
    }

    /** {@code /status} {@code storage_manager.store_controller.admission}. */
    public Map<String, Object> status() {
        Map<String, Object> status = new LinkedHashMap<>();
        status.put("policy", admission.flagValue());
        status.put("write_budget_bytes_per_second", settings.writeBudgetBytesPerSecond());
        status.put("admitted_bytes", admittedBytes.sum());
        status.put("admitted_on_lookup_bytes", admittedOnLookupBytes.sum());
        status.put("skipped_bytes", skippedBytes.sum());
        status.put("budget_dropped_bytes", budgetDroppedBytes.sum());
        synchronized (this) {
            if (admission instanceof L2Admission.Frequency frequency) {
                status.put("sketch_resets", frequency.resets());
            }
            if (budget != null) {
                status.put("budget_tenants", budget.tenants());
            }
        }
        return status;
    }
}
