package io.lmcache.server.metrics;

import io.lmcache.server.agent.AgentErrors;
import io.lmcache.server.cuda.Direction;
import io.lmcache.server.cuda.GpuBackend;
import io.lmcache.server.liveness.InstanceLivenessTarget;
import io.lmcache.server.liveness.Reaper;
import io.lmcache.server.liveness.ReleaseThread;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoreCounters;
import io.lmcache.server.storage.StoreCounters.EvictionReason;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.IntSupplier;

/**
 * Exposes what the L1 tier, the reaper, the release thread and the GPU count under LMCache's metric
 * names. Every supplier bound here is read by a scrape, on lmcache-http-*; they read counters and
 * O(1) fields only.
 */
public final class MetricsBinder {
    private MetricsBinder() {}

    /** The series every server has: L1, liveness, native releases, pending lookups. */
    public static void bindCore(ServerMetrics metrics, ObjectStore store, Reaper reaper, ReleaseThread releases, IntSupplier pendingLookups) {
        bindStore(metrics, store);
        bindLiveness(metrics, reaper);
        bindReleases(metrics, releases);
        bindLookups(metrics, pendingLookups);
    }

    public static void bindStore(ServerMetrics metrics, ObjectStore store) {
        StoreCounters c = store.counters();
        // runs on: lmcache-http-* (each scrape), as every supplier below
        adder(metrics, "lmcache_mp.l1_write_chunks", "chunk objects written to L1 (one per chunk per kv rank)", c.writeChunks);
        adder(metrics, "lmcache_mp.l1_read_chunks", "chunk objects read from L1", c.readChunks);
        adder(metrics, "lmcache_mp.l1_write_bytes", "bytes written to L1", c.writeBytes);
        adder(metrics, "lmcache_mp.l1_read_bytes", "bytes read from L1", c.readBytes);
        for (EvictionReason reason : EvictionReason.values()) {
            metrics.functionCounter("lmcache_mp.l1_evicted_chunks", "chunk objects removed from L1, by reason", c,
                    counters -> counters.evictions(reason), "reason", reason.label());
            metrics.functionCounter("lmcache_mp.l1_evicted_bytes", "bytes removed from L1, by reason", c,
                    counters -> counters.evictedBytes(reason), "reason", reason.label());
        }
        adder(metrics, "lmcache_mp.l1_eviction_loop_ticks", "passes of the eviction controller", c.evictionLoopTicks);
        adder(metrics, "lmcache_mp.l1_eviction_loop_triggered", "passes that found usage at the watermark", c.evictionLoopTriggered);
        adder(metrics, "lmcache_mp.l1_eviction_failures", "eviction passes that failed (the controller kept running)", c.evictionFailures);
        // LMCache's l1_allocation_failure_chunks{during, model_name}: made at the first failure of a model (the names are not known before)
        // runs on: the thread that reserved (a transfer lane, the CPU pool, lmcache-l2), under the object store's lock
        c.onAllocationFailure((during, model) -> metrics.declare("lmcache_mp.l1_allocation_failure_chunks", "chunks that found no room in L1",
                "during", during, "model_name", metrics.label("model_name", model)).increment());
        c.lifecycle().sink(new LifecycleMetrics(metrics, metrics.labels()));
        adder(metrics, "lmcache_mp.l1_lock_expiries", "locks reclaimed at their TTL", c.readLockExpiries, "kind", "read");
        adder(metrics, "lmcache_mp.l1_lock_expiries", "locks reclaimed at their TTL", c.writeLockExpiries, "kind", "write");
        adder(metrics, "lmcache_mp.l1_format_mismatches", "reads of an object stored in another layout (a miss)", c.formatMismatches);
        adder(metrics, "lmcache_mp.l1_reads_after_writes", "RETRIEVE reads that met a chunk still being written and waited for its write",
                c.readsAfterWrites);
        adder(metrics, "lmcache_mp.l1_lookups_after_writes", "LOOKUP passes left pending until the writes in flight they met ended",
                c.lookupsAfterWrites);
        adder(metrics, "lmcache_mp.l1_lookup_watches_refused", "chunks being written a LOOKUP counted as misses: too many lookups waited already",
                c.lookupWatchesRefused);
        metrics.onReset(c::reset);
        // O(1) fields published by the store: a scrape never waits on the lock inline LOOKUPs take
        metrics.gauge("lmcache_mp.l1_memory_usage_bytes", "bytes of L1 holding objects", store::usedBytes);
        metrics.gauge("lmcache_mp.l1_memory_total_bytes", "size of the L1 pool", store::poolBytes);
        metrics.gauge("lmcache_mp.l1_memory_ready_bytes", "bytes of L1 prepared and allocatable", store::readyBytes);
        metrics.gauge("lmcache_mp.l1_usage_ratio", "L1 used bytes over its size", store::usageRatio);
        metrics.gauge("lmcache_mp.l1_objects", "chunk objects in L1", store::objectCount);
    }

    public static void bindLiveness(ServerMetrics metrics, Reaper reaper) {
        // runs on: lmcache-http-* (each scrape); the reset hook on the /metrics/reset request
        metrics.gauge("lmcache_mp.tracked_instances", "worker instances the liveness targets track", reaper::trackedInstances);
        for (InstanceLivenessTarget.Reason reason : InstanceLivenessTarget.Reason.values()) {
            metrics.functionCounter("lmcache_mp.reaped_workers", "worker instances reaped, by reason", reaper, r -> r.reaped(reason),
                    "reason", reason.label());
        }
        metrics.functionCounter("lmcache_mp.reaper_scans", "passes of the worker reaper", reaper, Reaper::scans);
        metrics.onReset(reaper::resetCounters);
    }

    /** The release thread: every native release (shm unmap, CUDA IPC close) of UNREGISTER, the reaper and the last lease. */
    public static void bindReleases(ServerMetrics metrics, ReleaseThread releases) {
        // runs on: lmcache-http-* (each scrape)
        metrics.functionCounter("lmcache_mp.release_timeouts", "native releases abandoned past their time (a close stuck in the driver)",
                releases, ReleaseThread::timeouts);
        metrics.functionCounter("lmcache_mp.release_failures", "native release attempts that failed (retried with backoff)", releases,
                ReleaseThread::failures);
        metrics.functionCounter("lmcache_mp.release_completed", "native releases done (shm unmaps, CUDA IPC closes)", releases,
                ReleaseThread::completed);
        metrics.functionCounter("lmcache_mp.release_dropped", "native releases dropped: the end-of-life queue was full", releases,
                ReleaseThread::dropped);
        metrics.functionCounter("lmcache_mp.release_abandoned_cap_hits", "stuck releases waited on: the abandoned-thread cap was hit",
                releases, ReleaseThread::abandonedCapHits);
        metrics.gauge("lmcache_mp.release_pending", "native releases queued or running", releases::pending);
    }

    /** Failed turns of the background agents (each keeps running), by role. */
    public static void bindAgents(ServerMetrics metrics, AgentErrors errors, List<String> roles) {
        for (String role : roles) {
            // runs on: lmcache-http-* (each scrape)
            metrics.functionCounter("lmcache_mp.agent_errors", "failed turns of a background agent (it keeps running), by role", errors,
                    e -> e.count(role), "role", role);
        }
    }

    /** GPU time and bytes of the copies (CUDA hosts only): bytes over seconds is the rate the copies ran at on the GPU. */
    public static void bindGpu(ServerMetrics metrics, GpuBackend gpu) {
        for (Direction direction : Direction.values()) {
            String op = direction == Direction.TO_POOL ? "store" : "retrieve";
            // runs on: lmcache-http-* (each scrape); the reset hook below on the /metrics/reset request
            metrics.functionCounter("lmcache_mp.gpu_copy_seconds", "GPU time of completed copies, from the copy stream reaching a transfer to its last copy",
                    gpu, g -> g.copyNanos(direction) / 1e9, "op", op);
            metrics.functionCounter("lmcache_mp.gpu_copy_bytes", "bytes of completed GPU copies", gpu, g -> g.copyBytes(direction),
                    "op", op);
        }
        metrics.onReset(gpu::resetCopyCounters);
    }

    public static void bindLookups(ServerMetrics metrics, IntSupplier pendingResults) {
        // runs on: lmcache-http-* (each scrape)
        metrics.gauge("lmcache_mp.active_prefetch_jobs", "LOOKUP results not yet queried", pendingResults::getAsInt);
    }

    private static void adder(ServerMetrics metrics, String name, String help, LongAdder adder, String... tags) {
        metrics.functionCounter(name, help, adder, LongAdder::sum, tags);
    }
}
