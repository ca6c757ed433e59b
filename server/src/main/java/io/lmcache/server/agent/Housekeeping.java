package io.lmcache.server.agent;

import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The housekeeping thread, lmcache-housekeeping: eviction and the expiry sweeps, the activity log,
 * the worker reaper, the release watchdog and the transfer lanes' stall watch, as one composite agent. Its agents are time-driven and cheap per turn,
 * so an idle thread parks at most {@link #MAX_PARK_NS} between deadline checks.
 */
public final class Housekeeping {
    public static final String THREAD = "lmcache-housekeeping";
    /**
     * How late a housekeeping deadline may be seen (the shortest period is the reaper's, at least 50 ms); also bounds the
     * wake-ups of an idle server to 100/s, so an idle sidecar does not keep a vCPU of a small host awake.
     */
    public static final long MAX_PARK_NS = TimeUnit.MILLISECONDS.toNanos(10);
    /** An eviction pass or a reap in hand gets this long to finish at shutdown. */
    public static final long CLOSE_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(5);

    private Housekeeping() {}

    /** Builds the runner over {@code agents} (each keeps its own role for error counts); the caller starts it. */
    public static AgentRunner runner(AgentErrors errors, List<? extends Agent> agents) {
        return new AgentRunner(THREAD, new CompositeAgent("housekeeping", errors, agents), IdleStrategy.backoff(MAX_PARK_NS), errors,
                CLOSE_TIMEOUT_NS);
    }
}
