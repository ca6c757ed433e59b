package io.lmcache.server.warmup;

import io.lmcache.server.agent.NamedThreads;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.cuda.DeviceTensors;
import io.lmcache.server.cuda.GpuBackend;
import io.lmcache.server.cuda.ScratchMemory;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.transfer.CudaCopyPath;
import io.lmcache.server.transfer.InstanceContext;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.IntConsumer;
import java.util.function.IntFunction;
import java.util.function.LongPredicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The GPU warm-up of one device (issue 30), run by {@link GpuWarmups} once per device right after its first REGISTER (its
 * context exists then). Two things side by side:
 * <ul>
 * <li>the pool regions the first STOREs will allocate from ({@link ObjectStore#nextAllocationRegions}) are pinned now, on a
 * thread of their own ({@link GpuBackend#pinNow}; a region the background sweep is pinning is waited for), so the first
 * STORE after the REGISTER reply does not wait ~0.3 s for its region's {@code cuMemHostRegister};
 * <li>rounds of STORE, LOOKUP, QUERY_PREFETCH_STATUS, RETRIEVE, END_SESSION run through a {@link ScratchServer} whose worker
 * is a {@link CudaCopyPath} on the device's real copy engine, its STOREs reading the registering worker's KV (issue 52; scratch
 * device memory where its storages are too small) into scratch pinned host memory and its RETRIEVEs writing scratch device
 * memory ({@link ScratchMemory}: allocated in this server's context, freed afterwards), until the budget is spent or a worker's
 * transfer comes ({@link GpuWarmups.Stop}): the copy path's
 * Java, the engine's lanes, batched-copy head and staging kernel, events, the completions and commits on lmcache-cuda-events.
 * Rounds alternate 1 and 2 chunks, consecutive blocks (the batched-copy head) and blocks in reverse order (the kernel), and
 * a LOOKUP after the STORE's commit or while its copy is still running.
 * </ul>
 * No worker's memory is written and no live pool object is touched; the scratch memory is freed only once every scratch
 * transfer's completion ran (else it is kept: the GPU might still write it).
 */
public final class GpuScratchWarmup implements GpuWarmups.Runner {
    private static final Logger LOG = LoggerFactory.getLogger(GpuScratchWarmup.class);
    private static final byte TRANSFER_OK_TAIL = (byte) 0xc3;
    /** Regions pinned ahead: a first STORE of 64 chunks of 32 MiB spans two 1 GiB regions. */
    static final int FIRST_REGIONS = 2;
    /** How often the wait for the pool's pinning looks at the warm-up's {@link GpuWarmups.Stop}. */
    private static final long POOL_WAIT_SLICE_NS = TimeUnit.MILLISECONDS.toNanos(10);
    /** How long a scratch transfer's completion may take before the warm-up gives up on it. */
    private static final long SETTLE_NS = TimeUnit.SECONDS.toNanos(2);
    private static final int MAX_ROUNDS = 100_000;
    /** What the grace keeps back for settling and closing the scratch server after the rounds' latest end. */
    private static final long CLOSE_NS = TimeUnit.MILLISECONDS.toNanos(100);

    private final ServerConfig config;
    private final IntFunction<int[]> nextRegions;
    private final IntConsumer pinNow;
    private final LongPredicate poolPinned;
    private final ScratchParts parts;

    /** {@code poolPinned}: waits for the pool's background pinning until a deadline, and says whether it ended. */
    GpuScratchWarmup(ScratchParts parts, ServerConfig config, IntFunction<int[]> nextRegions, IntConsumer pinNow, LongPredicate poolPinned) {
        this.parts = parts;
        this.config = config;
        this.nextRegions = nextRegions;
        this.pinNow = pinNow;
        this.poolPinned = poolPinned;
    }

    /**
     * The server's GPU warm-ups: off without CUDA; else each CUDA worker's device ({@code --gpu-warmup-budget-ms},
     * {@code --gpu-warmup-register-wait-ms}), each on a scratch server opened through {@code parts} (the production parts the
     * root gives).
     */
    public static GpuWarmups forServer(ScratchParts parts, ServerConfig config, ObjectStore store, GpuBackend backend) {
        if (!backend.available()) {
            return GpuWarmups.off();
        }
        return new GpuWarmups(config.operator().gpuWarmupBudgetNs(), config.operator().gpuWarmupRegisterWaitNs(), path -> path instanceof CudaCopyPath,
                new GpuScratchWarmup(parts, config, store::nextAllocationRegions, backend::pinNow, backend::awaitPoolPinned));
    }

    @Override
    public GpuWarmups.Outcome run(InstanceContext worker, long budgetNs, GpuWarmups.Stop stop) {
        CudaCopyPath cuda = (CudaCopyPath) worker.copyPath();
        long deadlineNs = System.nanoTime() + budgetNs;
        PinAhead pins = new PinAhead(nextRegions.apply(FIRST_REGIONS), pinNow);
        pins.start("lmcache-gpu-warmup-pin-" + cuda.cudaDevice().ordinal());
        GpuWarmups.Outcome rounds;
        try {
            rounds = stop.requested() ? new GpuWarmups.Outcome(0, "stopping", 0)
                    : scratchRounds(worker, cuda, budgetNs, deadlineNs + GpuWarmups.GRACE_NS - CLOSE_NS, stop);
        } catch (RuntimeException | Error e) {
            rounds = new GpuWarmups.Outcome(0, "failed: " + e, 0);
        }
        int pinned = pins.await(deadlineNs + GpuWarmups.GRACE_NS - CLOSE_NS);
        String stoppedBy = pins.error() == null ? rounds.stoppedBy() : rounds.stoppedBy() + "; pinning ahead: " + pins.error();
        return new GpuWarmups.Outcome(rounds.rounds(), stoppedBy, pinned, rounds.poolWaitMs());
    }

    /**
     * The rounds get the whole budget from when the scratch server is open, the pool's background pinning has ended and
     * their first round is done: the opening (pinned scratch memory while the first regions are pinned beside it) can take
     * most of a 500 ms budget, rounds beside the pinning mostly wait ({@link #awaitPoolPinned}), and the first round pays the
     * device's one-time costs. They end by {@code latestNs} whatever the budget.
     * Their STOREs read the registering worker's own KV (the first bytes of its storages, under a lease on its registration
     * so an UNREGISTER cannot unmap them meanwhile) where its storages are large enough, else scratch device memory; nothing
     * of the worker's is ever written.
     */
    private GpuWarmups.Outcome scratchRounds(InstanceContext worker, CudaCopyPath cuda, long budgetNs, long latestNs, GpuWarmups.Stop stop) {
        ScratchServer.Layout layout = ScratchServer.Layout.gpu(config.chunkSize());
        ScratchMemory memory = ScratchMemory.allocate(cuda.cudaDevice(), layout.poolBytes(), layout.tensorBytes(), layout.regionBytes());
        InstanceContext.Lease lease = worker.acquire();
        DeviceTensors storeFrom = lease == null ? null : cuda.tensors().readAliases(layout.layers(), layout.tensorBytes());
        boolean settled = false;
        try {
            String[] why = new String[1];
            ScratchServer server = ScratchServer.openGpu(parts, config, layout, memory, cuda.engine(), storeFrom, why);
            if (server == null) {
                settled = true; // no scratch transfer ran
                return new GpuWarmups.Outcome(0, "skipped: " + why[0], 0);
            }
            try {
                long openedNs = System.nanoTime();
                awaitPoolPinned(poolPinned, latestNs - budgetNs, stop); // at the latest, a whole budget stays before latestNs
                long startNs = System.nanoTime();
                GpuWarmups.Outcome ran = rounds(server, budgetNs, latestNs, stop);
                return new GpuWarmups.Outcome(ran.rounds(), ran.stoppedBy(), 0, TimeUnit.NANOSECONDS.toMillis(startNs - openedNs));
            } finally {
                settled = server.awaitSettled(System.nanoTime() + SETTLE_NS);
                server.close();
            }
        } finally {
            if (settled) {
                memory.close();
                if (lease != null) {
                    lease.close();
                }
            } else {
                LOG.warn("GPU warm-up on GPU {}: a scratch transfer did not complete within {} s; its {} KiB of scratch memory stay"
                        + " allocated and instance {}'s registration leased (the GPU may still use them)", cuda.cudaDevice().ordinal(),
                        TimeUnit.NANOSECONDS.toSeconds(SETTLE_NS), (memory.hostBytes() + memory.deviceBytes()) >> 10, worker.instanceId());
            }
        }
    }

    /**
     * Waits until the pool's background pinning (every prepared region, on several threads from the first REGISTER on) has
     * ended, a worker's transfer comes or {@code untilNs}: each {@code cuMemHostRegister} holds the driver meanwhile, so
     * rounds beside the sweep mostly wait for it and a budget counted from the opening was spent on waiting (on an H100 host
     * the rounds that started soonest after the REGISTER ran fewest, bench/journal/2026-12-07-four-block-native-copy.md). The
     * latest end of the warm-up, and so of the REGISTER reply's wait, does not move.
     */
    static void awaitPoolPinned(LongPredicate poolPinned, long untilNs, GpuWarmups.Stop stop) {
        long now = System.nanoTime();
        while (!stop.requested() && untilNs - now > 0) {
            long sliceEndNs = Math.min(untilNs, now + POOL_WAIT_SLICE_NS);
            if (poolPinned.test(sliceEndNs)) {
                return;
            }
            now = System.nanoTime();
            if (sliceEndNs - now > 0) { // answered before its deadline, the sweep not ended (none begun yet): no busy loop
                LockSupport.parkNanos(sliceEndNs - now);
                now = System.nanoTime();
            }
        }
    }

    /**
     * Rounds until {@code budgetNs} after the first round's end is spent, or {@code latestNs}; each waits for its STORE's commit
     * and its RETRIEVE's completion before going on, and for a reply until {@code latestNs} at the latest. The budget starts
     * after the first round because that round pays the device's one-time costs (the first kernel's load and launch): on a
     * host that had just booted it took over 300 ms, and a budget counted from before it left no round at all
     * (bench/journal/2026-12-07-request-timelines.md).
     */
    private static GpuWarmups.Outcome rounds(ScratchServer server, long budgetNs, long latestNs, GpuWarmups.Stop stop) {
        long deadlineNs = latestNs;
        ScratchServer.Layout layout = server.layout;
        WarmupFrames frames = new WarmupFrames(ScratchServer.MODEL, ScratchServer.INSTANCE_ID);
        int chunkSize = server.chunkSize;
        int[] tokens = new int[layout.maxChunks() * chunkSize];
        SplittableRandom random = new SplittableRandom(32);
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = random.nextInt(150_000);
        }
        for (int round = 0; ; round++) {
            String stoppedBy = stop.requested() ? "stopping" : System.nanoTime() - deadlineNs >= 0 ? "budget" : round >= MAX_ROUNDS ? "done" : null;
            if (stoppedBy != null) {
                return new GpuWarmups.Outcome(round, stoppedBy, 0);
            }
            String failed;
            try {
                failed = round(server, frames, tokens, round, latestNs);
            } catch (ScratchServer.NoReply e) {
                failed = "budget"; // a reply still out at the latest end: the budget ended the warm-up mid-round
            }
            if (failed != null) {
                return new GpuWarmups.Outcome(round, failed, 0);
            }
            if (round == 0) {
                deadlineNs = Math.min(latestNs, System.nanoTime() + budgetNs);
            }
        }
    }

    /** One round: null, or what failed. */
    private static String round(ScratchServer server, WarmupFrames frames, int[] tokens, int round, long latestNs) {
        int chunks = 1 + round % 2;
        boolean reversed = (round / 2) % 2 == 1;
        boolean lookupWhileWriting = (round / 4) % 2 == 1;
        int count = chunks * server.blocksPerChunk;
        int end = chunks * server.chunkSize;
        tokens[0] = round; // a new prefix: every chunk hash of this round is new
        String request = "gpu-warmup-" + round;
        if (!transferOk(server.call(frames.store(tokens, end, WarmupFrames.blocks(0, count, reversed), request), latestNs))) {
            return "a scratch STORE failed";
        }
        if (lookupWhileWriting) {
            // as vLLM's scheduler asks while the copy is still on the GPU: the LOOKUP finds the chunks being written,
            // leaves its result pending (the QUERY answers None) and runs again from their commit on lmcache-cuda-events;
            // without these rounds a fresh server's first real LOOKUP threw away the compiled commit and lookup code
            // (bench/journal/2026-12-07-request-timelines.md)
            server.call(frames.lookup(tokens, end, request), latestNs);
            server.call(frames.queryPrefetchStatus(request), latestNs);
        }
        if (!server.awaitSettled(System.nanoTime() + SETTLE_NS)) {
            return "a scratch STORE did not complete";
        }
        if (!lookupWhileWriting) {
            server.call(frames.lookup(tokens, end, request), latestNs);
        }
        server.call(frames.queryPrefetchStatus(request), latestNs);
        int[] into = WarmupFrames.blocks(server.layout.maxChunks() * server.blocksPerChunk, count, reversed);
        if (!transferOk(server.call(frames.retrieve(tokens, end, into, request), latestNs))) {
            return "a scratch RETRIEVE failed";
        }
        if (!server.awaitSettled(System.nanoTime() + SETTLE_NS)) {
            return "a scratch RETRIEVE did not complete";
        }
        server.call(frames.endSession(request), latestNs);
        server.clear(); // the scratch pool holds two rounds' objects at most
        return null;
    }

    /** A STORE/RETRIEVE reply {@code (event, True)}. */
    private static boolean transferOk(byte[] payload) {
        return payload != null && payload.length > 0 && payload[payload.length - 1] == TRANSFER_OK_TAIL;
    }

    /** Pins the first regions on a thread of its own (the driver pins regions in parallel), so the rounds run meanwhile. */
    static final class PinAhead {
        private final int[] regions;
        private final IntConsumer pinNow;
        private final AtomicInteger pinned = new AtomicInteger();
        private volatile String error;
        private Thread thread;

        PinAhead(int[] regions, IntConsumer pinNow) {
            this.regions = regions;
            this.pinNow = pinNow;
        }

        void start(String name) {
            // runs on: lmcache-gpu-warmup-pin-N (one-shot)
            thread = NamedThreads.thread(name, true, () -> {
                for (int region : regions) {
                    try {
                        pinNow.accept(region);
                        pinned.incrementAndGet();
                    } catch (RuntimeException e) {
                        error = "region " + region + ": " + e.getMessage(); // the STORE pins it on the spot then, as before
                    }
                }
            });
            thread.start();
        }

        /** The regions pinned by {@code deadlineNs} (the thread keeps pinning after it, if it must). */
        int await(long deadlineNs) {
            NamedThreads.join(thread, Math.max(1, deadlineNs - System.nanoTime()));
            return pinned.get();
        }

        String error() {
            return error;
        }
    }
}
