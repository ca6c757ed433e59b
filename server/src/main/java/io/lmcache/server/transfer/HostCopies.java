package io.lmcache.server.transfer;

import io.lmcache.server.agent.NamedThreads;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import java.util.function.IntFunction;

/**
 * The CPU workers' copy threads (issue 52), shared by every host-path copy of the server: one core's memcpy reaches a
 * fraction of a host's memory bandwidth, so a STORE's or RETRIEVE's pieces are cut into runs of about {@code runBytes}
 * ({@link HostPieces}) that the transfer thread and up to {@code threads - 1} lmcache-copy-N threads take one at a time until
 * none is left. Runs are many more than threads so that a thread the scheduler sets aside (other lanes' transfer threads, the
 * request loop, the clients) holds up one short run, not a share of the whole copy. The transfer thread copies too and
 * returns only after every run landed, so the reply, and the commit before it, still follow the last byte (the rule the GPU
 * path keeps with its completion event).
 *
 * <p>Bounded: a fixed set of threads made at start, and a bounded queue of tickets (a ticket asks one thread to help one
 * copy); a ticket that does not fit, or a pool already closed, leaves the runs to the transfer thread, which takes every
 * run nobody took. Copies of less than two runs stay on the transfer thread: waking a thread costs more than they gain.
 */
public final class HostCopies implements AutoCloseable {
    /** A copy is cut into at most this many runs per copying thread: enough to even out a thread set aside for a while. */
    static final int MAX_RUNS_PER_THREAD = 64;
    /** Copying threads per NUMA node at most, by default: past that a node's memory bandwidth is spent. */
    static final int DEFAULT_THREADS_PER_NODE = 16;
    private static final long SPIN_NS = 20_000;
    private static final long JOIN_NS = TimeUnit.SECONDS.toNanos(5);
    private static final Copy STOP = new Copy(null, null, null, false, 0, PieceCopy.JAVA);

    private final int threads;
    private final long runBytes;
    private final StreamingCopy.Load copies;
    private final LongAdder transferRuns;
    private final LongAdder helperRuns;
    private final BlockingQueue<Copy> tickets;
    private final List<Thread> helpers = new ArrayList<>();
    private volatile boolean closed;

    private HostCopies(int threads, long runBytes, StreamingCopy.Load copies, LongAdder transferRuns, LongAdder helperRuns) {
        this.threads = threads;
        this.runBytes = runBytes;
        this.copies = copies;
        this.transferRuns = transferRuns;
        this.helperRuns = helperRuns;
        this.tickets = new ArrayBlockingQueue<>(Math.max(1, threads * 64));
        for (int i = 1; i < threads; i++) {
            // runs on: lmcache-copy-N, until close
            Thread helper = NamedThreads.thread("lmcache-copy-" + (i - 1), true, this::serve);
            helpers.add(helper);
            helper.start();
        }
    }

    /**
     * {@code threads} copying threads in all, the transfer thread included (so {@code threads - 1} are started), each copy cut
     * into runs of about {@code runBytes} ({@code -Dlmcache.transfer.hostRunKiB}), each piece copied by the native streaming
     * copy where {@code copies} loaded it, else by {@code MemorySegment.copy}; the runs each kind of thread copied are counted in
     * {@code transferRuns} and {@code helperRuns}.
     */
    public static HostCopies start(int threads, long runBytes, StreamingCopy.Load copies, LongAdder transferRuns, LongAdder helperRuns) {
        if (threads < 1) {
            throw new IllegalArgumentException("copy threads must be at least 1, got " + threads);
        }
        if (runBytes < 4096) {
            throw new IllegalArgumentException("a run must be at least 4 KiB, got " + runBytes);
        }
        return new HostCopies(threads, runBytes, copies, transferRuns, helperRuns);
    }

    /** Every copy on the transfer thread alone, by {@code MemorySegment.copy} (no thread started, nothing counted): the warm-up's scratch server, tests. */
    public static HostCopies inline() {
        return new HostCopies(1, Long.MAX_VALUE, new StreamingCopy.Absent("one thread's inline copies"), new LongAdder(), new LongAdder());
    }

    /** How many runs a copy of {@code bytes} is cut into: one per {@code runBytes}, at most {@link #MAX_RUNS_PER_THREAD} a thread. */
    int runs(long bytes) {
        return threads == 1 ? 1 : (int) Math.min((long) threads * MAX_RUNS_PER_THREAD, Math.max(1, bytes / runBytes));
    }

    /**
     * {@code --cpu-copy-threads auto}: one copier per core, at most {@link #DEFAULT_THREADS_PER_NODE} per NUMA node the pool's
     * memory may sit on ({@code numaNodes}; 0 or less reads as one).
     */
    public static int defaultThreads(int cores, int numaNodes) {
        return Math.max(1, Math.min(cores, DEFAULT_THREADS_PER_NODE * Math.max(1, numaNodes)));
    }

    /**
     * {@code /status} {@code cpu_copy}: the copying threads (the transfer thread included) and how a piece is copied
     * ({@code native non-temporal stores (256-bit)}, or {@code MemorySegment.copy} and why).
     */
    public Map<String, Object> status() {
        return Map.of("threads", threads, "copy", copies.describe());
    }

    /** Copying threads in all, the transfer thread included. */
    public int threads() {
        return threads;
    }

    /**
     * Copies {@code pieces} between {@code tensors} and {@code pool}; returns once every byte landed. A failure of any run
     * is rethrown here (as {@link IllegalStateException}, its cause the first failure) after every other run ended.
     */
    void copy(HostPieces pieces, IntFunction<MemorySegment> tensors, MemorySegment pool, boolean toPool) {
        int runs = runs(pieces.bytes());
        if (runs == 1 || closed) {
            pieces.copyGroup(0, 1, tensors, pool, toPool, copies.copier());
            transferRuns.increment();
            return;
        }
        Copy copy = new Copy(pieces, tensors, pool, toPool, runs, copies.copier());
        int helpersWanted = Math.min(threads - 1, runs - 1);
        for (int i = 0; i < helpersWanted && tickets.offer(copy); i++) {
            // a ticket per helper wanted; the runs of those that did not fit are the other threads'
        }
        transferRuns.add(copy.work());
        copy.await();
        Throwable failure = copy.failure;
        if (failure != null) {
            throw new IllegalStateException("a copy thread failed: " + failure, failure);
        }
    }

    private void serve() {
        while (true) {
            Copy copy;
            try {
                copy = tickets.take();
            } catch (InterruptedException e) {
                return; // nobody interrupts these threads; if something does, it means stop
            }
            if (copy == STOP) {
                return;
            }
            helperRuns.add(copy.work());
        }
    }

    /**
     * Stops the copy threads: each finishes the run in hand and the tickets queued before the stop (their copies' transfer
     * threads wait for them), then leaves; joined, at most 5 s in all. Later copies run on their transfer thread.
     */
    @Override
    public void close() {
        closed = true;
        for (int i = 0; i < helpers.size(); i++) {
            try {
                tickets.put(STOP);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        long deadlineNs = System.nanoTime() + JOIN_NS;
        for (Thread helper : helpers) {
            NamedThreads.join(helper, Math.max(1, deadlineNs - System.nanoTime()));
        }
    }

    /** One copy's runs: each thread that holds it takes the next run nobody took, until none is left. */
    private static final class Copy {
        private final HostPieces pieces;
        private final IntFunction<MemorySegment> tensors;
        private final MemorySegment pool;
        private final boolean toPool;
        private final int runs;
    private final PieceCopy copier;
        private final AtomicInteger next = new AtomicInteger();
        private final AtomicInteger done = new AtomicInteger();
        private final Thread owner = Thread.currentThread();
        private volatile Throwable failure;

        Copy(HostPieces pieces, IntFunction<MemorySegment> tensors, MemorySegment pool, boolean toPool, int runs, PieceCopy copier) {
            this.pieces = pieces;
            this.tensors = tensors;
            this.pool = pool;
            this.toPool = toPool;
            this.runs = runs;
            this.copier = copier;
        }

        /** Copies runs until none is left to take; returns how many this thread copied. */
        int work() {
            int copied = 0;
            int run;
            while ((run = next.getAndIncrement()) < runs) {
                copied++;
                try {
                    pieces.copyGroup(run, runs, tensors, pool, toPool, copier);
                } catch (RuntimeException | Error e) {
                    if (failure == null) {
                        failure = e;
                    }
                } finally {
                    if (done.incrementAndGet() == runs) {
                        LockSupport.unpark(owner);
                    }
                }
            }
            return copied;
        }

        /** On the transfer thread: until the runs other threads took have landed (they are being copied: not long). */
        void await() {
            long spinUntilNs = System.nanoTime() + SPIN_NS;
            while (done.get() < runs) {
                if (System.nanoTime() < spinUntilNs) {
                    Thread.onSpinWait();
                } else {
                    LockSupport.parkNanos(this, 100_000);
                }
            }
        }
    }
}
