package io.lmcache.server.storage;

import io.lmcache.server.agent.NamedThreads;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.IntConsumer;
import java.util.function.IntFunction;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Gets the pool's regions ready in the background: each is prefaulted ({@code MADV_POPULATE_WRITE},
 * asking for transparent huge pages first) and run through the stages (pinning, with a GPU), then
 * handed over. Several threads take regions in turn: one thread ran at 1.4–1.8 GiB/s on the GPU host,
 * where the kernel's page zeroing and the driver's page pinning of different regions run in
 * parallel; a 200 GB pool took over two minutes. Regions are taken in order, so the first ones are
 * ready within moments whatever the pool's size. The first failure stops every thread; the server
 * serves with the regions ready by then.
 */
final class PoolPreparation {
    private static final Logger LOG = LoggerFactory.getLogger(PoolPreparation.class);
    private static final long PAGE = 4096;
    /** Linux: back the range with huge pages where transparent huge pages allow it (fewer faults, and far fewer pages to pin). */
    private static final int MADV_HUGEPAGE = 14;
    private static final long STOP_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(30);

    private final IntFunction<MemorySegment> slices;
    private final int regionCount;
    private final long bytes;
    private final long regionBytes;
    private final List<L1Pool.RegionStage> stages;
    private final IntConsumer ready;
    private final Plan plan;
    private final AtomicInteger nextRegion = new AtomicInteger();
    private final AtomicInteger prepared = new AtomicInteger();
    /** Thread-nanoseconds of prefaulting, then of each stage: which part bounds the rate. */
    private final LongAdder[] stageNanos;
    private final List<Thread> threads = new ArrayList<>();
    private volatile boolean stopping;
    private volatile String error = "";
    private volatile boolean populateWorks = true;
    private long startNs;

    /** How the regions are prepared: on how many threads (see {@link #threads}), and asking for huge pages or not. */
    record Plan(int threads, boolean hugePages) {}

    PoolPreparation(IntFunction<MemorySegment> slices, int regionCount, long bytes, long regionBytes, List<L1Pool.RegionStage> stages,
            IntConsumer ready, Plan plan) {
        this.slices = slices;
        this.plan = plan;
        this.stageNanos = new LongAdder[stages.size() + 1];
        for (int i = 0; i < stageNanos.length; i++) {
            stageNanos[i] = new LongAdder();
        }
        this.regionCount = regionCount;
        this.bytes = bytes;
        this.regionBytes = regionBytes;
        this.stages = stages;
        this.ready = ready;
    }

    /**
     * The threads to prepare with: with huge pages every core up to 16 (a 64 GiB /dev/shm pool: 4 threads 14.8 GiB/s, 8
     * threads 21.3, 16 threads 24.4 on the H200 host; on memory the VM had not backed yet, 8 threads 5.5 and 16 threads
     * 9.6), with 4 KiB pages half the cores up to 8 (the kernel's page allocation stops scaling there: 8 threads 4.7,
     * 16 threads 4.3). Preparation runs once, at startup, while the engine loads its model.
     *
     * @param override {@code -Dlmcache.l1.prepareThreads} ({@code config.Tuning.prepareThreads}; 0: none)
     */
    static int threads(int cores, boolean hugePages, int override) {
        if (override > 0) {
            return override;
        }
        return hugePages ? Math.clamp(cores, 1, 16) : Math.clamp(cores / 2, 1, 8);
    }

    void start() {
        startNs = System.nanoTime();
        int count = threadCount();
        for (int i = 0; i < count; i++) {
            // runs on: lmcache-pool-prepare-N (one-shot; stops by the stopping flag after the region in hand)
            Thread thread = NamedThreads.thread("lmcache-pool-prepare-" + i, true, this::work);
            threads.add(thread);
            thread.start();
        }
        LOG.info("L1 pool preparation: {} regions of {} MiB on {} thread(s){}", regionCount, regionBytes >> 20, count,
                plan.hugePages() ? ", huge pages" : ", 4 KiB pages (no huge pages for this pool on this host)");
    }

    private void work() {
        while (!stopping) {
            int region = nextRegion.getAndIncrement();
            if (region >= regionCount) {
                return;
            }
            MemorySegment slice = slices.apply(region);
            try {
                long stepNs = System.nanoTime();
                Posix.madvise(slice, MADV_HUGEPAGE);
                // prefaulting first, although pinning would fault the pages itself: measured, leaving the faults to
                // cuMemHostRegister took 1.6 GiB/s instead of 4.3 (/dev/shm, 16 threads): the driver faults under its lock
                if (!(populateWorks && Posix.madvise(slice, Posix.MADV_POPULATE_WRITE))) {
                    populateWorks = false;
                    touchPages(slice);
                }
                for (int i = 0; i <= stages.size(); i++) {
                    if (i > 0) {
                        stages.get(i - 1).prepare(region, slice);
                    }
                    long nowNs = System.nanoTime();
                    stageNanos[i].add(nowNs - stepNs);
                    stepNs = nowNs;
                }
            } catch (Throwable t) {
                stopping = true;
                error = "region " + region + ": " + t;
                LOG.error("L1 pool preparation stopped at region {} of {}: {} — serving with the {} region(s) that are ready", region,
                        regionCount, t.toString(), prepared.get());
                return;
            }
            ready.accept(region);
            progress();
        }
    }

    /** A line at every tenth of the pool, and at the end with the rate (in order: the count and its line go together). */
    private synchronized void progress() {
        int done = prepared.incrementAndGet();
        int tenth = (int) (10L * done / regionCount);
        if (tenth != (int) (10L * (done - 1) / regionCount) || done == regionCount) {
            long elapsedNs = System.nanoTime() - startNs;
            long doneBytes = Math.min(bytes, (long) done * regionBytes);
            StringBuilder split = new StringBuilder("prefault");
            for (int i = 0; i < stageNanos.length; i++) {
                split.append(i == 0 ? "" : ", " + stages.get(i - 1).name()).append(' ')
                        .append(TimeUnit.NANOSECONDS.toMillis(stageNanos[i].sum())).append(" ms");
            }
            LOG.info("L1 pool preparation: {}% ({} of {} regions, {} MiB) in {} ms ({} GiB/s{}; thread time: {})",
                    100L * done / regionCount, done, regionCount, doneBytes >> 20, TimeUnit.NANOSECONDS.toMillis(elapsedNs),
                    String.format("%.1f", doneBytes / (elapsedNs / 1e9) / (1L << 30)),
                    done == regionCount ? "" : ", about " + etaSeconds(done, regionCount, elapsedNs) + " s left", split);
        }
    }

    /** The seconds left at the rate so far (rounded up): the regions are of one size and prepared alike. */
    static long etaSeconds(int done, int total, long elapsedNs) {
        if (done <= 0 || done >= total) {
            return 0;
        }
        double leftNs = (double) elapsedNs * (total - done) / done;
        return (long) Math.ceil(leftNs / 1e9);
    }

    private static void touchPages(MemorySegment slice) {
        for (long offset = 0; offset < slice.byteSize(); offset += PAGE) {
            slice.set(ValueLayout.JAVA_BYTE, offset, (byte) 0);
        }
    }

    /** The threads that actually run: never more than there are regions. */
    int threadCount() {
        return Math.min(plan.threads(), regionCount);
    }

    boolean hugePages() {
        return plan.hugePages();
    }

    int prepared() {
        return prepared.get();
    }

    String error() {
        return error;
    }

    /** Stops after the regions in hand, waiting at most 30 s in all (idempotent). */
    void stop() {
        stopping = true;
        long deadlineNs = System.nanoTime() + STOP_TIMEOUT_NS;
        for (Thread thread : threads) {
            NamedThreads.join(thread, Math.max(1, deadlineNs - System.nanoTime()));
        }
    }
}
