package io.lmcache.server.cuda;

import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * When the pool's regions are page-locked for DMA. Pinning needs a CUDA context, and a context holds device memory
 * (LMCache's server pinned through one on cuda:0 at start, ~616 MiB on a GPU no worker may use: its issue #4019), so
 * nothing is pinned before the first GPU worker registers: regions the pool preparation hands over before then are only
 * recorded ({@link #prepared}). The first registration {@link #start}s pinning through its GPU's context (portable, so
 * every other GPU's context sees the pages): background threads pin the recorded regions highest first (the order the
 * allocator uses them), the highest alone before the others start (the first STORE after a REGISTER allocates there, issue
 * 52), and regions prepared afterwards are pinned by the preparation thread that hands them over, as before. A transfer that
 * meets a region not pinned yet pins it on the spot ({@link #ensure}); only a GPU transfer needs a pinned region, so CPU
 * workers and the pool are never held up. Pure logic around a {@link Pinner}, so the host-only tests drive it without a GPU.
 */
public final class PinSchedule {
    private static final Logger LOG = LoggerFactory.getLogger(PinSchedule.class);
    private static final long STOP_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(30);
    private static final int UNPINNED = 0;
    private static final int PINNED = 1;
    private static final int FAILED = 2;

    /** Page-locks one region (cuMemHostRegister through the chosen GPU's context, in {@link PinnedPool}). */
    @FunctionalInterface
    public interface Pinner {
        void pin(int region, MemorySegment slice);
    }

    /** What /status shows: waiting for the first GPU registration, pinning, or every prepared region pinned. */
    public enum State { WAITING, PINNING, DONE }

    private final MemorySegment[] slices;
    private final AtomicIntegerArray state;
    private final Object[] regionLocks;
    private final int sweepThreads;
    private final AtomicInteger pinned = new AtomicInteger();
    private final AtomicInteger nextSweep = new AtomicInteger();
    private final AtomicInteger sweepsRunning = new AtomicInteger();
    private final List<Thread> threads = new ArrayList<>();
    /** Counted down once the first region (the highest prepared at the start) is pinned or given up: the other sweeps wait. */
    private final CountDownLatch firstAlone = new CountDownLatch(1);
    /** Guarded by this: null until the first GPU registration. */
    private Pinner pinner;
    private volatile boolean stopping;
    private volatile String error = "";

    public PinSchedule(int regions, int sweepThreads) {
        this.slices = new MemorySegment[regions];
        this.state = new AtomicIntegerArray(regions);
        this.regionLocks = new Object[regions];
        for (int i = 0; i < regions; i++) {
            regionLocks[i] = new Object();
        }
        this.sweepThreads = Math.max(1, sweepThreads);
    }

    /** A region the pool preparation has ready (prefaulted): recorded, and pinned now if pinning has started. */
    public void prepared(int region, MemorySegment slice) {
        Pinner chosen;
        synchronized (this) {
            slices[region] = slice;
            chosen = pinner;
        }
        if (chosen != null) {
            ensure(region);
        }
    }

    /**
     * Starts pinning through {@code first} (the first GPU registration's); later calls do nothing. Returns whether this
     * call started it. The regions recorded so far are pinned on background threads (lmcache-pool-pin-N).
     */
    public boolean start(Pinner first) {
        synchronized (this) {
            if (pinner != null || stopping) {
                return false;
            }
            pinner = first;
            sweepsRunning.set(sweepThreads);
            int top = highestPrepared();
            for (int i = 0; i < sweepThreads; i++) {
                // the region the first STOREs allocate from is pinned alone, ahead of the rest: pinned side by side with the
                // others, each cuMemHostRegister shares the driver and the page tables with them and the first STORE waits longer
                Runnable work = i == 0 ? () -> {
                    pinFirst(top);
                    sweep();
                } : () -> {
                    awaitFirst();
                    sweep();
                };
                // runs on: lmcache-pool-pin-N (one-shot: ends after the last recorded region, or at stop)
                Thread thread = Thread.ofPlatform().name("lmcache-pool-pin-" + i).daemon().unstarted(work);
                threads.add(thread);
                thread.start();
            }
        }
        return true;
    }

    /** The highest region prepared so far, or -1 (the allocator's first: see {@link #sweep}). Under this object's lock. */
    private int highestPrepared() {
        for (int region = slices.length - 1; region >= 0; region--) {
            if (slices[region] != null) {
                return region;
            }
        }
        return -1;
    }

    private void pinFirst(int region) {
        try {
            if (region >= 0 && !stopping) {
                ensure(region);
            }
        } catch (RuntimeException e) {
            // recorded by ensure (the region's state and error): the sweep goes on with the others
        } finally {
            firstAlone.countDown();
        }
    }

    private void awaitFirst() {
        try {
            while (!stopping && !firstAlone.await(100, TimeUnit.MILLISECONDS)) {
                // until the first region is pinned, or the schedule stops
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void sweep() {
        try {
            while (!stopping) {
                // highest first: the pool's allocator takes the most recently added region first (a stack, regions added
                // lowest first), so the first STOREs after a REGISTER land where the sweep has already pinned, instead of
                // pinning their region on the spot (H200: ~16 ms handler over a fresh server's first 20 STOREs otherwise)
                int region = slices.length - 1 - nextSweep.getAndIncrement();
                if (region < 0) {
                    return;
                }
                MemorySegment slice;
                synchronized (this) {
                    slice = slices[region];
                }
                if (slice != null) {
                    ensure(region); // a region prepared later is pinned by its preparation thread (prepared sees the pinner)
                }
            }
        } catch (RuntimeException e) {
            LOG.error("pinning the L1 pool stopped: {} (GPU transfers pin each region they meet instead)", e.getMessage());
        } finally {
            sweepsRunning.decrementAndGet();
        }
    }

    /**
     * Pins the region now unless it is pinned already; throws {@link CudaException} when it cannot (no GPU registration
     * yet, the region not prepared, or the driver refused it: then every later call throws the same).
     */
    public void ensure(int region) {
        if (state.get(region) == PINNED) {
            return;
        }
        synchronized (regionLocks[region]) {
            int now = state.get(region);
            if (now == PINNED) {
                return;
            }
            if (now == FAILED) {
                throw new CudaException("pool region " + region + " could not be pinned: " + error);
            }
            Pinner chosen;
            MemorySegment slice;
            synchronized (this) {
                chosen = pinner;
                slice = slices[region];
            }
            if (chosen == null || slice == null) {
                throw new CudaException("pool region " + region + " is not pinned yet (" + (chosen == null
                        ? "no GPU worker has registered" : "the region is not prepared") + ")");
            }
            try {
                chosen.pin(region, slice);
            } catch (RuntimeException e) {
                error = "region " + region + ": " + e.getMessage();
                state.set(region, FAILED);
                throw e;
            }
            state.set(region, PINNED);
            pinned.incrementAndGet();
        }
    }

    public boolean isPinned(int region) {
        return state.get(region) == PINNED;
    }

    public int pinnedRegions() {
        return pinned.get();
    }

    public int regions() {
        return slices.length;
    }

    public synchronized State state() {
        if (pinner == null) {
            return State.WAITING;
        }
        return sweepsRunning.get() > 0 ? State.PINNING : State.DONE;
    }

    /**
     * Waits until the background sweeps have ended (each region recorded at the start pinned, failed or left at a stop), or
     * until {@code deadlineNs} (System.nanoTime) at the latest; whether they have. False before the first registration.
     * For the GPU warm-up: while the sweeps run, each {@code cuMemHostRegister} holds the driver, and the warm-up's own
     * driver calls mostly wait behind them.
     */
    public boolean awaitSwept(long deadlineNs) {
        List<Thread> sweeps;
        synchronized (this) {
            if (pinner == null) {
                return false;
            }
            sweeps = List.copyOf(threads);
        }
        return joinAll(sweeps, deadlineNs);
    }

    /** Joins each thread until {@code deadlineNs} at the latest; whether all have ended (false when interrupted). */
    private static boolean joinAll(List<Thread> threads, long deadlineNs) {
        try {
            for (Thread thread : threads) {
                if (!thread.join(Duration.ofNanos(Math.max(0, deadlineNs - System.nanoTime())))) {
                    return false;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
        return true;
    }

    /** The first pinning failure, or "". */
    public String error() {
        return error;
    }

    /** Stops the background pinning after the regions in hand and waits for it (bounded); later starts do nothing. */
    public void stop() {
        List<Thread> running;
        synchronized (this) {
            stopping = true;
            running = List.copyOf(threads);
        }
        joinAll(running, System.nanoTime() + STOP_TIMEOUT_NS);
    }
}
