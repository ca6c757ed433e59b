package io.lmcache.server.liveness;

import io.lmcache.server.metrics.LivenessCatalogue;
import io.lmcache.server.metrics.ServerMetrics;

/** Binds the reaper's and the release thread's counts to their meters ({@link LivenessCatalogue}); read by each scrape. */
public final class LivenessMeters {
    private LivenessMeters() {}

    public static void bind(ServerMetrics metrics, Reaper reaper) {
        // runs on: lmcache-http-* (each scrape); the reset hook on the /metrics/reset request
        metrics.gauge(LivenessCatalogue.TRACKED_INSTANCES, reaper::trackedInstances);
        for (InstanceLivenessTarget.Reason reason : InstanceLivenessTarget.Reason.values()) {
            metrics.functionCounter(LivenessCatalogue.REAPED_WORKERS, reaper, r -> r.reaped(reason), reason.label());
        }
        metrics.functionCounter(LivenessCatalogue.REAPER_SCANS, reaper, Reaper::scans);
        metrics.onReset(reaper::resetCounters);
    }

    /** The release thread: every native release (shm unmap, CUDA IPC close) of UNREGISTER, the reaper and the last lease. */
    public static void bind(ServerMetrics metrics, ReleaseThread releases) {
        // runs on: lmcache-http-* (each scrape)
        metrics.functionCounter(LivenessCatalogue.RELEASE_TIMEOUTS, releases, ReleaseThread::timeouts);
        metrics.functionCounter(LivenessCatalogue.RELEASE_FAILURES, releases, ReleaseThread::failures);
        metrics.functionCounter(LivenessCatalogue.RELEASE_COMPLETED, releases, ReleaseThread::completed);
        metrics.functionCounter(LivenessCatalogue.RELEASE_DROPPED, releases, ReleaseThread::dropped);
        metrics.functionCounter(LivenessCatalogue.RELEASE_ABANDONED_CAP_HITS, releases, ReleaseThread::abandonedCapHits);
        metrics.gauge(LivenessCatalogue.RELEASE_PENDING, releases::pending);
    }
}
