package io.lmcache.server.liveness;

import io.lmcache.server.metrics.ServerMetrics;

/** The reaper's and the release thread's counters under LMCache-style names (until the one counter catalogue takes them). */
public final class ReleaseMetrics {
    private ReleaseMetrics() {}

    public static void bind(ServerMetrics metrics, Reaper reaper, ReleaseThread releases) {
        metrics.functionCounter("lmcache_mp.reaper_scans", "passes of the worker reaper", reaper, Reaper::scans);
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
}
