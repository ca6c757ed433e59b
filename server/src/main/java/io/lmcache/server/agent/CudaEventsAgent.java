package io.lmcache.server.agent;

import io.lmcache.server.cuda.EventPoller;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * The CUDA event poller as an agent on its own thread, lmcache-cuda-events (only when CUDA is
 * present): transfer completions run there, so they stay short and hand anything that can block
 * to the release path. Its own thread, not housekeeping: completions answer waiting workers, and
 * a slow eviction pass must not delay them.
 */
public final class CudaEventsAgent implements Agent {
    public static final String THREAD = "lmcache-cuda-events";
    /** While transfers are in flight: how often their events are queried. */
    private static final long BUSY_PARK_NS = TimeUnit.MICROSECONDS.toNanos(20);
    /**
     * The same with the streams' host functions waking this thread at each transfer's end ({@code config.Tuning.hostFnWake}):
     * the poll is then only the fallback.
     */
    private static final long BUSY_PARK_WOKEN_NS = TimeUnit.MICROSECONDS.toNanos(250);
    /** With none in flight; tracking a transfer wakes the thread at once. */
    private static final long IDLE_PARK_NS = TimeUnit.MILLISECONDS.toNanos(100);
    private static final long CLOSE_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(2);

    private final EventPoller poller;

    public CudaEventsAgent(EventPoller poller) {
        this.poller = poller;
    }

    @Override
    public int doWork() {
        return poller.doWork();
    }

    @Override
    public String roleName() {
        return "cuda-events";
    }

    /**
     * Builds the runner (the caller starts it); the poller's close (GpuBackend's) drains what is left on the closing thread.
     * {@code wake}: the handle the poller was made with (it runs it when a transfer is tracked, on lmcache-transfer-*); the
     * runner binds its thread to it.
     */
    public static AgentRunner runner(EventPoller poller, AgentErrors errors, boolean hostFnWake, Wake wake) {
        long busyParkNs = hostFnWake ? BUSY_PARK_WOKEN_NS : BUSY_PARK_NS;
        // runs on: lmcache-cuda-events (after each turn)
        IdleStrategy idle = workCount -> LockSupport.parkNanos(poller.pendingCount() > 0 ? busyParkNs : IDLE_PARK_NS);
        return new AgentRunner(THREAD, new CudaEventsAgent(poller), idle, errors, CLOSE_TIMEOUT_NS, wake);
    }
}
