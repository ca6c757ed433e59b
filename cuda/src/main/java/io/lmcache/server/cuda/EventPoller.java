package io.lmcache.server.cuda;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import jcuda.driver.CUevent;
import jcuda.driver.JCudaDriver;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Watches the events recorded after each transfer: when one completes, the transfer's completion
 * runs (publish the stored objects, unpin the retrieved ones). Exported events are destroyed only
 * well after they completed, since the worker opens our handle after it gets the reply and the
 * event must still exist then.
 */
public final class EventPoller implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(EventPoller.class);
    private static final int CUDA_ERROR_NOT_READY = 600;
    private static final long KEEP_ALIVE_NS = TimeUnit.SECONDS.toNanos(30);

    /** Runs once the GPU has finished (or failed) the transfer's work. */
    @FunctionalInterface
    public interface Completion {
        void done(boolean ok, String error);
    }

    private record Pending(CudaDevice device, CUevent event, CUevent[] alsoDestroy, Completion completion) {}

    private record Retiring(CudaDevice device, CUevent event, CUevent[] alsoDestroy, long completedNs) {}

    private final ArrayDeque<Pending> pending = new ArrayDeque<>();
    private final ArrayDeque<Retiring> retiring = new ArrayDeque<>();
    private final Thread thread;
    private volatile boolean running = true;

    public EventPoller() {
        thread = new Thread(this::run, "lmcache-cuda-events");
        thread.setDaemon(true);
        thread.start();
    }

    /** Watches {@code event}; {@code alsoDestroy} (an opened client event) goes with it. */
    void track(CudaDevice device, CUevent event, CUevent[] alsoDestroy, Completion completion) {
        synchronized (pending) {
            pending.add(new Pending(device, event, alsoDestroy, completion));
        }
        LockSupport.unpark(thread);
    }

    /** Stub until the event poller becomes an agent (another change adds the real one): polls nothing. */
    public int doWork() {
        return 0;
    }

    public int pendingCount() {
        synchronized (pending) {
            return pending.size();
        }
    }

    private void run() {
        // reused every pass (this thread only): the poller turns every 20 µs while copies run
        List<Pending> snapshot = new ArrayList<>();
        List<Pending> finished = new ArrayList<>();
        while (running) {
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
                    complete(p, result == 0, result == 0 ? null : "transfer failed on the GPU (CUDA error " + result + ")");
                } catch (RuntimeException e) {
                    finished.add(p);
                    complete(p, false, e.toString());
                }
            }
            if (!finished.isEmpty()) {
                synchronized (pending) {
                    pending.removeAll(finished);
                }
                long nowNs = System.nanoTime();
                for (Pending p : finished) {
                    retiring.add(new Retiring(p.device(), p.event(), p.alsoDestroy(), nowNs));
                }
            }
            destroyRetired(System.nanoTime(), false);
            if (snapshot.size() == finished.size()) {
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(100));
            } else {
                LockSupport.parkNanos(20_000);
            }
        }
    }

    private static void complete(Pending p, boolean ok, String error) {
        try {
            p.completion().done(ok, error);
        } catch (RuntimeException e) {
            LOG.error("transfer completion failed", e);
        }
    }

    private void destroyRetired(long nowNs, boolean all) {
        for (Iterator<Retiring> it = retiring.iterator(); it.hasNext(); ) {
            Retiring r = it.next();
            if (!all && nowNs - r.completedNs() < KEEP_ALIVE_NS) {
                break; // completion order is age order
            }
            it.remove();
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
    }

    /** Waits (bounded) for what is in flight, then stops. */
    @Override
    public void close() {
        long deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (pendingCount() > 0 && System.nanoTime() - deadlineNs < 0) {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
        }
        running = false;
        LockSupport.unpark(thread);
        try {
            thread.join(2000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        destroyRetired(System.nanoTime(), true);
    }
}
