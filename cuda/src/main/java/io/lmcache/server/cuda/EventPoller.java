package io.lmcache.server.cuda;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import jcuda.driver.CUevent;
import jcuda.driver.CUhostFn;
import jcuda.driver.CUstream;
import jcuda.driver.JCudaDriver;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Watches the events recorded after each transfer: when one completes, the transfer's completion
 * runs (publish the stored objects, unpin the retrieved ones). Exported events are destroyed only
 * well after they completed, since the worker opens our handle after it gets the reply and the
 * event must still exist then. Starts no thread: the server runs {@link #doWork()} as an agent on
 * lmcache-cuda-events, and completions run there, so each must be short and never block.
 */
public final class EventPoller implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(EventPoller.class);
    private static final int CUDA_ERROR_NOT_READY = 600;
    private static final long KEEP_ALIVE_NS = TimeUnit.SECONDS.toNanos(30);
    /**
     * The most completed events kept for their keep-alive: interprocess events are a bounded driver resource (on the
     * H200 cuEventCreate failed with CUDA_ERROR_OUT_OF_MEMORY at ~4 000 alive,
     * bench/RESULTS.md#gpu-store-visibility-and-commit-delay), so past this many the oldest go early, once they are
     * {@link #MIN_KEEP_ALIVE_NS} old (a worker opens our handle within milliseconds of the reply).
     */
    static final int MAX_RETIRING = 1024;
    private static final long MIN_KEEP_ALIVE_NS = TimeUnit.SECONDS.toNanos(2);
    private static final long CLOSE_WAIT_NS = TimeUnit.SECONDS.toNanos(10);

    /**
     * Runs once the GPU has finished (or failed) the transfer's work; short and non-blocking. {@code finishedNs}: when the
     * GPU reached the end of the transfer ({@link System#nanoTime()}), from the stream's host function where it ran, else
     * when this poller saw the event complete.
     */
    @FunctionalInterface
    public interface Completion {
        void done(boolean ok, String error, long finishedNs);
    }

    /**
     * When the GPU reached a transfer's end: set by a host function that a watch stream runs once the transfer's event has
     * fired ({@link #watchAfter}), which also wakes the poller, so a completion runs within microseconds of the copy's
     * end instead of at the next poll.
     */
    static final class Reached {
        volatile long atNs;
    }

    private record Pending(CudaDevice device, CUevent event, CUevent[] alsoDestroy, Completion completion, Reached reached) {}

    private record Retiring(CudaDevice device, CUevent event, CUevent[] alsoDestroy, long completedNs) {}

    private final ArrayDeque<Pending> pending = new ArrayDeque<>();
    /** Held for a whole pass: the runner's turns and close's draining never overlap. */
    private final Object pollLock = new Object();
    // under pollLock: reused every pass, the poller turns every 20 µs while copies run
    private final ArrayDeque<Retiring> retiring = new ArrayDeque<>();
    private final List<Pending> snapshot = new ArrayList<>();
    private final List<Pending> finished = new ArrayList<>();
    private boolean closed;
    /** What to call when a transfer is tracked (the runner's wake-up), so a parked poller sees it at once. */
    private final Runnable wakeUp;
    /**
     * Short GPU work a handler hands this thread so it stays off the request's own path (an idle lane's context warm-up,
     * {@link CopyEngine#warm}, and the open of a worker's event, {@link OpenedAhead}), run at the start of the next pass.
     * Bounded by its posters: one warm-up per lane at a time, at most {@link OpenedAhead#MAX_SLOTS} opens and one sweep.
     */
    private final ConcurrentLinkedQueue<Runnable> soon = new ConcurrentLinkedQueue<>();
    private static final long TASK_FAILURE_LOG_INTERVAL_NS = TimeUnit.MINUTES.toNanos(1);
    // this poller's thread's (the only one running posted tasks but for close's drain, which runs them too, under no race
    // that matters for a log line's rate)
    private long taskFailures;
    private long lastTaskFailureLogNs;

    /** A poller no thread waits on (the host-only backend's, tests). */
    public EventPoller() {
        this(() -> { });
    }

    /**
     * {@code wakeUp}: runs when a transfer is tracked; the handle its runner binds its thread to, made before both (the server's
     * {@code agent.Wake}), so nothing is wired after construction.
     */
    public EventPoller(Runnable wakeUp) {
        this.wakeUp = wakeUp;
    }

    /** Watches {@code event}; {@code alsoDestroy} (an opened client event) goes with it; {@code reached} may be null. */
    void track(CudaDevice device, CUevent event, CUevent[] alsoDestroy, Completion completion, Reached reached) {
        synchronized (pending) {
            pending.add(new Pending(device, event, alsoDestroy, completion, reached));
        }
        wakeUp.run();
    }

    /**
     * Has {@code watch} (a stream that does nothing else) wait for {@code event}, then run a host function that stamps
     * {@code reached} and wakes the poller. False (the poller then finds the event at its next poll) when the driver refuses
     * either call.
     */
    boolean watchAfter(CUevent event, CUstream watch, Reached reached) {
        return JCudaDriver.cuStreamWaitEvent(watch, event, 0) == 0 && JCudaDriver.cuLaunchHostFunc(watch, stampAndWake, reached) == 0;
    }

    /**
     * Runs on: a CUDA driver thread, in stream order; it may call no CUDA function, and must be short (its stream waits for
     * it: so the copy engine enqueues it on a stream of its own, {@code Lane.watchStream}, never on a copy stream).
     */
    private final CUhostFn stampAndWake = data -> {
        ((Reached) data).atNs = System.nanoTime();
        wakeRunner();
    };

    private void wakeRunner() {
        wakeUp.run();
    }

    /** Runs {@code task} on this poller's thread at its next pass (woken now); the poster bounds how many wait. */
    void runSoon(Runnable task) {
        soon.add(task);
        wakeUp.run();
    }

    public int pendingCount() {
        synchronized (pending) {
            return pending.size();
        }
    }

    /**
     * One pass: queries every pending event once, runs the completions of those that finished, and
     * destroys retired events past their keep-alive. Returns how many completed or were destroyed.
     */
    public int doWork() {
        synchronized (pollLock) {
            // posted tasks too stop with the poller: it closes before the copy engines they would launch on
            return closed ? 0 : runPosted() + poll(System.nanoTime());
        }
    }

    private int runPosted() {
        int ran = 0;
        for (Runnable task; (task = soon.poll()) != null; ran++) {
            try {
                task.run();
            } catch (RuntimeException e) {
                taskFailures++;
                long nowNs = System.nanoTime();
                if (taskFailures == 1 || nowNs - lastTaskFailureLogNs > TASK_FAILURE_LOG_INTERVAL_NS) { // one line a minute at most
                    lastTaskFailureLogNs = nowNs;
                    LOG.warn("a posted GPU task failed ({} so far): {}", taskFailures, e.toString());
                }
            }
        }
        return ran;
    }

    private int poll(long nowNs) {
        snapshot.clear();
        finished.clear();
        synchronized (pending) {
            snapshot.addAll(pending);
        }
        for (Pending p : snapshot) {
            try {
                p.device().makeCurrent();
                int result = JCudaDriver.cuEventQuery(p.event());
                if (result == CUDA_ERROR_NOT_READY) {
                    continue;
                }
                finished.add(p);
                complete(p, result == 0, result == 0 ? null : "transfer failed on the GPU (CUDA error " + result + ")", nowNs);
            } catch (RuntimeException e) {
                finished.add(p);
                complete(p, false, e.toString(), nowNs);
            }
        }
        if (!finished.isEmpty()) {
            synchronized (pending) {
                pending.removeAll(finished);
            }
            for (Pending p : finished) {
                retiring.add(new Retiring(p.device(), p.event(), p.alsoDestroy(), nowNs));
            }
        }
        return finished.size() + destroyRetired(System.nanoTime(), false);
    }

    /** Runs on: lmcache-cuda-events (or, during close, the closing thread). */
    private static void complete(Pending p, boolean ok, String error, long polledNs) {
        long reachedNs = p.reached() == null ? 0 : p.reached().atNs;
        try {
            p.completion().done(ok, error, reachedNs != 0 ? reachedNs : polledNs);
        } catch (RuntimeException e) {
            LOG.error("transfer completion failed", e);
        }
    }

    private int destroyRetired(long nowNs, boolean all) {
        int destroyed = 0;
        for (Iterator<Retiring> it = retiring.iterator(); it.hasNext(); ) {
            Retiring r = it.next();
            long ageNs = nowNs - r.completedNs();
            boolean crowded = retiring.size() > MAX_RETIRING && ageNs >= MIN_KEEP_ALIVE_NS;
            if (!all && ageNs < KEEP_ALIVE_NS && !crowded) {
                break; // completion order is age order
            }
            it.remove();
            destroyed++;
            try {
                r.device().makeCurrent();
                JCudaDriver.cuEventDestroy(r.event());
                for (CUevent other : r.alsoDestroy()) {
                    JCudaDriver.cuEventDestroy(other);
                }
            } catch (RuntimeException e) {
                LOG.warn("cannot destroy a retired CUDA event: {}", e.toString());
            }
        }
        return destroyed;
    }

    /**
     * Waits (bounded) for what is in flight, polling on the calling thread as well (so it works
     * whether or not the runner still turns), then destroys every retired event. Idempotent.
     */
    @Override
    public void close() {
        long deadlineNs = System.nanoTime() + CLOSE_WAIT_NS;
        while (pendingCount() > 0 && System.nanoTime() - deadlineNs < 0) {
            if (doWork() == 0) {
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
            }
        }
        synchronized (pollLock) {
            if (!closed) {
                closed = true;
                int left = pendingCount();
                if (left > 0) {
                    LOG.warn("{} GPU transfer(s) still in flight after {} s; closing without them", left, CLOSE_WAIT_NS / 1_000_000_000L);
                }
                destroyRetired(System.nanoTime(), true);
            }
        }
    }
}
