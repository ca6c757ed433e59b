package io.lmcache.server.agent;

import java.util.concurrent.TimeUnit;

/**
 * How long a thread on the request path busy-waits before it parks. A parked thread takes tens of microseconds to wake,
 * in series with a request alone in flight; a spinning one holds a core. So threads spin only on hosts with cores to
 * spare (a GPU host has dozens), never on small ones, where the clients and the pools need every core (measured on the
 * 2-core development machine: bench/RESULTS.md, request-path latency).
 */
public final class SpinPolicy {
    /** Hosts with fewer cores never spin unless a property says so. */
    public static final int MIN_CORES = 8;
    /**
     * The window on such hosts: a worker's requests of one engine step (and a hit's RETRIEVE after the scheduler's
     * LOOKUP) come within it, so they find a spinning thread; an idle server parks after it. One spinning thread per
     * pool that uses it (the transfer pool), so at most one core.
     */
    public static final long BIG_HOST_SPIN_US = 5000;

    private SpinPolicy() {}

    /** {@code -D<property>=<µs>} if given, else {@code bigHostUs} on a host with {@link #MIN_CORES} or more, else 0. */
    public static long nanos(String property, long bigHostUs) {
        long defaultUs = Runtime.getRuntime().availableProcessors() >= MIN_CORES ? bigHostUs : 0;
        return TimeUnit.MICROSECONDS.toNanos(Math.max(0, Long.getLong(property, defaultUs)));
    }
}
