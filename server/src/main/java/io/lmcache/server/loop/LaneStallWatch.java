package io.lmcache.server.loop;

import io.lmcache.server.agent.Agent;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.metrics.LivenessCatalogue;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.peer.PeerId;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Says so when a request has run on a peer's transfer lane for {@link #STALL_NS}: a REGISTER's CUDA IPC opening, like a
 * close, can block in the driver, and the peer's later requests wait behind it (a REGISTER of a raw-wrapper worker was never
 * answered in one GPU test run, 2026-12-06, with no record of where it waited). Each such request is counted once
 * ({@code lmcache_mp_transfer_lane_stalls_total}) and logged, rate-limited, with its thread's stack, so the next one shows
 * where it waits. It only reports: a thread stuck in native code cannot be taken back. Runs on: lmcache-housekeeping.
 */
public final class LaneStallWatch implements Agent {
    /** Far beyond any request's normal time (a REGISTER opens its handles in tens of milliseconds), short of a client's patience. */
    public static final long STALL_NS = TimeUnit.SECONDS.toNanos(30);
    private static final long CHECK_INTERVAL_NS = TimeUnit.SECONDS.toNanos(1);
    /** Frames of a stalled thread's stack in its log line: the handler's call into the driver is within the first few. */
    static final int MAX_FRAMES = 24;
    private static final Logger LOG = LoggerFactory.getLogger(LaneStallWatch.class);
    private static final RateLimitedLog STALL_LINES = new RateLimitedLog(LOG, "transfer lane stalls", 10);

    private final LongFunction<List<KeyedSerialExecutor.Running<PeerId>>> runningSince;
    private final LongAdder stalls;
    private final long stallNs;
    private final long intervalNs;
    /** The stalled tasks reported so far that still run: at most one per lane, pruned every pass. */
    private final Set<KeyedSerialExecutor.Running<PeerId>> reported = new HashSet<>();
    private long nextCheckNs = System.nanoTime();

    /** Over the dispatcher's transfer lanes, with the production times. */
    public LaneStallWatch(Dispatcher dispatcher, ServerMetrics metrics) {
        this(dispatcher::transfersRunningSince, metrics, STALL_NS, CHECK_INTERVAL_NS);
    }

    LaneStallWatch(LongFunction<List<KeyedSerialExecutor.Running<PeerId>>> runningSince, ServerMetrics metrics, long stallNs,
            long intervalNs) {
        this.runningSince = runningSince;
        this.stalls = metrics.declare(LivenessCatalogue.TRANSFER_LANE_STALLS);
        this.stallNs = stallNs;
        this.intervalNs = intervalNs;
    }

    @Override
    public int doWork() {
        long nowNs = System.nanoTime();
        if (nowNs - nextCheckNs < 0) {
            return 0;
        }
        nextCheckNs = nowNs + intervalNs;
        List<KeyedSerialExecutor.Running<PeerId>> stalled = runningSince.apply(nowNs - stallNs);
        reported.retainAll(stalled);
        int found = 0;
        for (KeyedSerialExecutor.Running<PeerId> running : stalled) {
            if (reported.add(running)) {
                found++;
                stalls.increment();
                STALL_LINES.warn("a request of peer {} has run for {} s on {} and its later requests wait behind it (a call that does"
                        + " not return, e.g. in the CUDA driver?); where it is: {}", LogText.clip(running.key()),
                        TimeUnit.NANOSECONDS.toSeconds(nowNs - running.startedNs()), running.thread().getName(), stack(running.thread()));
            }
        }
        return found;
    }

    /** The thread's innermost {@link #MAX_FRAMES} frames, one line: also for the dispatcher's shutdown, when a lane does not end. */
    static String stack(Thread thread) {
        StackTraceElement[] frames = thread.getStackTrace();
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < Math.min(frames.length, MAX_FRAMES); i++) {
            out.append(i == 0 ? "" : " <- ").append(frames[i]);
        }
        if (frames.length > MAX_FRAMES) {
            out.append(" <- ... ").append(frames.length - MAX_FRAMES).append(" more");
        }
        return out.toString();
    }

    @Override
    public String roleName() {
        return "lane-stall-watch";
    }
}
