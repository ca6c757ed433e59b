package io.lmcache.server.metrics;

import static io.lmcache.server.metrics.MeterSpec.counter;
import static io.lmcache.server.metrics.MeterSpec.gauge;

/** The worker reaper's, the release thread's and the transfer lanes' stall watch's and deadline's series. */
public enum LivenessCatalogue implements CatalogueEntry {
    TRACKED_INSTANCES(gauge("lmcache_mp.tracked_instances", "worker instances the liveness targets track")),
    REAPED_WORKERS(counter("lmcache_mp.reaped_workers", "worker instances reaped, by reason", "reason")),
    REAPER_SCANS(counter("lmcache_mp.reaper_scans", "passes of the worker reaper")),
    RELEASE_TIMEOUTS(counter("lmcache_mp.release_timeouts", "native releases abandoned past their time (a close stuck in the driver)")),
    RELEASE_FAILURES(counter("lmcache_mp.release_failures", "native release attempts that failed (retried with backoff)")),
    RELEASE_COMPLETED(counter("lmcache_mp.release_completed", "native releases done (shm unmaps, CUDA IPC closes)")),
    RELEASE_DROPPED(counter("lmcache_mp.release_dropped", "native releases dropped: the end-of-life queue was full")),
    RELEASE_ABANDONED_CAP_HITS(counter("lmcache_mp.release_abandoned_cap_hits", "stuck releases waited on: the abandoned-thread cap was hit")),
    RELEASE_PENDING(gauge("lmcache_mp.release_pending", "native releases queued or running")),
    TRANSFER_LANE_STALLS(counter("lmcache_mp.transfer_lane_stalls",
            "requests still running on a transfer lane 30 s after they started (a call that does not return); each counted once")),
    TRANSFER_LANE_DEADLINE_ANSWERS(counter("lmcache_mp.transfer_lane_deadline_answers",
            "stalled registrations (REGISTER, UNREGISTER, the layer-wise event pool) answered with their failure value, the peer's lane"
                    + " going on without them")),
    TRANSFER_LANE_ABANDON_CAP_HITS(counter("lmcache_mp.transfer_lane_abandon_cap_hits",
            "stalled registrations answered whose lane still waits for them: 4 transfer threads were stuck already")),
    TRANSFER_THREADS_ABANDONED(gauge("lmcache_mp.transfer_threads_abandoned",
            "transfer threads still in a stalled registration, each replaced by a fresh one"));

    private final MeterSpec spec;

    LivenessCatalogue(MeterSpec spec) {
        this.spec = spec;
    }

    @Override
    public MeterSpec spec() {
        return spec;
    }
}
