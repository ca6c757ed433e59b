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
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The transfer lanes' deadline: a request still running on a peer's lane {@link #STALL_NS} after it started. A REGISTER's
 * CUDA IPC opening, like a close, can block in the driver, and the peer's later requests wait behind it (a REGISTER of a
 * raw-wrapper worker was never answered in one GPU test run, 2026-12-06, with no record of where it waited). Each such
 * request is counted once ({@code lmcache_mp_transfer_lane_stalls_total}) and logged, rate-limited, with its thread's
 * stack, so it shows where it waits. A registration ({@link OpEntry.Handled#answeredAtDeadline}) is then answered with its failure
 * value and its lane goes on on a fresh thread ({@link Dispatcher#answerStalled}): a thread stuck in native code cannot be
 * taken back, but the client need not wait for it. A STORE or RETRIEVE is only reported: its reply must follow its copy.
 * Runs on: lmcache-housekeeping.
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
    /** Answers a stalled request if its op allows (true), freeing its lane. */
    private final Predicate<KeyedSerialExecutor.Running<PeerId>> answer;
    private final LongAdder stalls;
    private final long stallNs;
    private final long intervalNs;
    /** The stalled tasks reported so far that still run: at most one per lane, pruned every pass. */
    private final Set<KeyedSerialExecutor.Running<PeerId>> reported = new HashSet<>();
    private long nextCheckNs = System.nanoTime();

    /** Over the dispatcher's transfer lanes, with a deadline of {@code stallNs} ({@link #STALL_NS}; a test server's may be shorter). */
    public LaneStallWatch(Dispatcher dispatcher, ServerMetrics metrics, long stallNs) {
        this(dispatcher::transfersRunningSince, dispatcher::answerStalled, metrics, stallNs, CHECK_INTERVAL_NS);
    }

    LaneStallWatch(LongFunction<List<KeyedSerialExecutor.Running<PeerId>>> runningSince,
            Predicate<KeyedSerialExecutor.Running<PeerId>> answer, ServerMetrics metrics, long stallNs, long intervalNs) {
        this.runningSince = runningSince;
        this.answer = answer;
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
                String stack = stack(running.thread());
                boolean answered = answer.test(running);
                STALL_LINES.warn("a request of peer {} has run for {} s on {} (a call that does not return, e.g. in the CUDA driver?); {};"
                        + " where it is: {}", LogText.clip(running.key()), TimeUnit.NANOSECONDS.toSeconds(nowNs - running.startedNs()),
                        running.thread().getName(), answered ? "a registration: answered with its failure value, the peer's later"
                        + " requests go on without it" : "its reply must follow its copy: the peer's later requests wait behind it",
                        stack);
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
