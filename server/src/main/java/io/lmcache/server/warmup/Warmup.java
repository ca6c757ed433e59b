package io.lmcache.server.warmup;

import io.lmcache.server.config.OperatorSettings;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.agent.NamedThreads;
import io.lmcache.server.transfer.CopyPath;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The JIT warm-up at start-up (issue 30): while the pool's first region is being prepared, runs the request path a fresh
 * server would otherwise interpret for its first hundreds of requests (a worker's STORE, the scheduler's LOOKUP and
 * QUERY_PREFETCH_STATUS, the RETRIEVE, END_SESSION: decode, chunk hashing, planning, reservations, the host copy, the
 * KV-event commit, lookup and lock, the reply's encoding; in the second half of the rounds, or the last nine tenths where
 * rounds may go on in the background, also the ZeroMQ path: JeroMQ's engines and the request loop) on a {@link ScratchServer},
 * until C2 has compiled it. JDK 25's
 * ahead-of-time cache keeps no compiled code (JEP 515 only its profiles), so this is what makes the first requests fast.
 * Nothing real is touched: the scratch server has its own metrics, store, memory, event log and threads, and is closed before
 * the server is ready. Rounds run until {@code --warmup-iterations} are done or the time budget is spent.
 */
public final class Warmup implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(Warmup.class);
    private static final byte[] TRANSFER_OK_TAIL = {(byte) 0xc3};
    /** A round's requests: STORE, LOOKUP, QUERY_PREFETCH_STATUS, RETRIEVE, END_SESSION and a worker's heartbeat PING. */
    static final int REQUESTS_PER_ROUND = 6;

    /**
     * The share of the rounds (and of the budget) that go straight to the scratch dispatcher before the rest take the ZeroMQ
     * path: a round through the loopback loop costs several times a direct one (JeroMQ's I/O threads and the loop's wake-ups
     * at both ends), so half the budget gives the handlers more rounds and the ZeroMQ path enough to be compiled. Measured
     * on the H200 against no direct rounds and against three quarters direct
     * (bench/RESULTS.md#gpu-fresh-server-against-warm).
     */
    private static final double DIRECT_SHARE = 0.5;

    /**
     * The direct share where the rounds left over at ready go on in the background: those run every handler in-process a
     * thousand times and more before a worker's first STORE, but none of them takes JeroMQ's TCP engine (no port of the
     * warm-up's outlives ready, issue 45 N11), so the start-up gives nine tenths of its budget to the loopback loop. The
     * launcher's lowered compile thresholds cost start-up rounds: at half, with them, 26–33 rounds went through TCP in a 2 s
     * budget on the 2-core VM and the engine's receive path was still partly in C1's profiling code at a worker's first
     * request; at nine tenths 54–83 (bench/journal/2026-12-07-tcp-share-and-jit-thresholds.md).
     */
    private static final double DIRECT_SHARE_WITH_BACKGROUND = 0.1;

    /**
     * What ran, for {@code /status} ({@code jit_warmup}) and the start-up log.
     *
     * @param rounds rounds done (each: {@link #REQUESTS_PER_ROUND} requests)
     * @param requested rounds asked for ({@code --warmup-iterations}; 0: off)
     * @param elapsedNs wall time of the warm-up, the scratch server's opening and closing included
     * @param stoppedBy "done", "budget" (the time budget ran out first), "off", "small host: N cores" (skipped), or why it
     *     stopped early
     * @param zeromqRounds of the rounds, those whose requests took the ZeroMQ path (a client's DEALER to the scratch server's
     *     own request loop: on loopback TCP before ready, in-process after); the others went straight to its dispatcher
     * @param zeromqSkipped why no round took the ZeroMQ path (its loop could not be opened), or null
     * @param loopbackConnections connections the scratch worker made to that loop over loopback TCP (before ready, a new one
     *     every {@code ScratchServer.CALLS_PER_CONNECTION} requests, so the first real connections find their handshake compiled)
     * @param scratchParts the production parts its scratch server opened ({@link ScratchParts}), in opening order; empty when
     *     none was opened
     */
    public record Result(int rounds, int requested, long elapsedNs, long budgetNs, long openNs, String stoppedBy, int zeromqRounds,
            String zeromqSkipped, int loopbackConnections, List<String> scratchParts) {
        public static final Result OFF = new Result(0, 0, 0, 0, 0, "off", 0, null, 0, List.of());

        public Result {
            scratchParts = List.copyOf(scratchParts);
        }

        public Map<String, Object> toMap() {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("ran", rounds > 0);
            out.put("iterations", rounds);
            out.put("iterations_requested", requested);
            out.put("requests", (long) REQUESTS_PER_ROUND * rounds);
            out.put("zeromq_iterations", zeromqRounds);
            if (zeromqSkipped != null) {
                out.put("zeromq_skipped", zeromqSkipped);
            }
            out.put("zeromq_loopback_connections", loopbackConnections);
            out.put("ms", TimeUnit.NANOSECONDS.toMillis(elapsedNs));
            out.put("budget_ms", TimeUnit.NANOSECONDS.toMillis(budgetNs));
            out.put("scratch_open_ms", TimeUnit.NANOSECONDS.toMillis(openNs));
            out.put("stopped_by", stoppedBy);
            if (!scratchParts.isEmpty()) {
                out.put("scratch_parts", scratchParts);
            }
            return out;
        }

        private Result timed(long elapsedNs, long openNs) {
            return new Result(rounds, requested, elapsedNs, budgetNs, openNs, stoppedBy, zeromqRounds, zeromqSkipped, loopbackConnections,
                    scratchParts);
        }
    }

    /**
     * Below this many cores the start-up warm-up at its default size is skipped: on 2 cores it spent its whole 1 s budget for
     * 1 to 3 of its 3 000 rounds (issue 51), the compiler threads and the rounds taking turns on the same cores, so it only
     * delayed ready. The background rounds switch off below {@code Tuning.SPIN_MIN_CORES} already.
     */
    static final int SMALL_HOST_CORES = 4;

    private final Result startUp;
    /** The rounds left over at {@code ready}, going on in the background; null when there are none. */
    private final Background background;

    private Warmup(Result startUp, Background background) {
        this.startUp = startUp;
        this.background = background;
    }

    /**
     * Runs the start-up warm-up alone, on this thread, and closes its scratch server (opened through {@code parts}); never
     * throws (tests, tools).
     */
    public static Result run(ScratchParts parts, ServerConfig config, Object poolFileKey) {
        try (Warmup warmup = start(parts, config, poolFileKey, 0)) {
            return warmup.startUp;
        }
    }

    /**
     * Runs the start-up warm-up on this thread (until its rounds are done or {@code --warmup-budget-ms} is spent) and, when
     * rounds are left and {@code --warmup-background-ms} allows, goes on with them on {@code lmcache-warmup} until they are
     * done, that budget is spent or {@link #firstRequest} (or {@link #close}) stops them. Its scratch server is opened through
     * {@code parts}, the production parts the root gives. Never throws.
     */
    public static Warmup start(ScratchParts parts, ServerConfig config, Object poolFileKey) {
        return start(parts, config, poolFileKey, config.operator().warmupBackgroundNs());
    }

    private static Warmup start(ScratchParts parts, ServerConfig config, Object poolFileKey, long backgroundNs) {
        int iterations = config.operator().warmupIterations();
        long budgetNs = config.operator().warmupBudgetNs();
        if (iterations == 0 || budgetNs == 0) {
            return new Warmup(Result.OFF, null);
        }
        int cores = Runtime.getRuntime().availableProcessors();
        if (skippedOnSmallHost(iterations, cores)) {
            LOG.info("JIT warm-up: skipped on this small host ({} cores, fewer than {}: its rounds and the JIT's compiler threads"
                    + " would share the cores and the default {} rounds cannot finish in the {} ms budget, so start-up would only be"
                    + " slower); --warmup-iterations with another count runs that many anyway", cores, SMALL_HOST_CORES, iterations,
                    TimeUnit.NANOSECONDS.toMillis(budgetNs));
            return new Warmup(new Result(0, iterations, 0, budgetNs, 0, "small host: " + cores + " cores", 0, null, 0, List.of()),
                    null);
        }
        long startNs = System.nanoTime();
        String[] why = new String[1];
        Result result;
        long openNs = 0;
        Background background = null;
        ScratchServer server = null;
        try {
            CopyPath.loadAll();
            server = ScratchServer.open(parts, config, poolFileKey, why);
            if (server == null) {
                result = new Result(0, iterations, 0, budgetNs, 0, "skipped: " + why[0], 0, null, 0, List.of());
            } else {
                openNs = System.nanoTime() - startNs;
                Rounds rounds = new Rounds(server, config, iterations);
                double directShare = backgroundNs > 0 ? DIRECT_SHARE_WITH_BACKGROUND : DIRECT_SHARE;
                result = rounds.run(startNs, budgetNs, directShare, ScratchServer.Listen.LOOPBACK_TCP, () -> null);
                if (backgroundNs > 0 && result.stoppedBy().equals("budget")) {
                    rounds.leaveLoopback();
                    background = new Background(server, rounds, backgroundNs);
                }
            }
        } catch (RuntimeException | Error e) {
            result = new Result(0, iterations, 0, budgetNs, 0, "failed: " + e, 0, null, 0, List.of());
        } finally {
            if (server != null && background == null) {
                server.close();
            }
        }
        if (background != null && !background.start()) {
            background = null;
        }
        Result done = result.timed(System.nanoTime() - startNs, openNs);
        LOG.info("JIT warm-up: {} of {} rounds ({} requests on a scratch store, {} rounds through ZeroMQ on {} loopback connections{}) in {}"
                + " ms ({} ms to open it), {}{}",
                done.rounds(), iterations, (long) REQUESTS_PER_ROUND * done.rounds(), done.zeromqRounds(), done.loopbackConnections(),
                done.zeromqSkipped() == null ? "" : ": " + done.zeromqSkipped(), TimeUnit.NANOSECONDS.toMillis(done.elapsedNs()),
                TimeUnit.NANOSECONDS.toMillis(done.openNs()), done.stoppedBy(),
                background == null ? "" : "; the other rounds go on in the background until the first request past a client's start, for "
                        + TimeUnit.NANOSECONDS.toMillis(backgroundNs) + " ms at most");
        return new Warmup(done, background);
    }

    /**
     * Whether the start-up warm-up is skipped: on a host of fewer than {@link #SMALL_HOST_CORES} cores, when the rounds are
     * the default count (an operator who gives {@code --warmup-iterations} another count gets them, as the tests do).
     */
    static boolean skippedOnSmallHost(int iterations, int cores) {
        return cores < SMALL_HOST_CORES && iterations == OperatorSettings.DEFAULT_WARMUP_ITERATIONS;
    }

    /** Where the background rounds' scratch request loop listens, or null (tests: never on TCP after ready). */
    String backgroundLoopEndpoint() {
        return background == null ? null : background.server.loopEndpoint();
    }

    /** What ran before {@code ready}. */
    public Result startUp() {
        return startUp;
    }

    /**
     * The server's first request past a client's start has arrived ({@code Op#sentAtClientStart}: not a worker's
     * GET_CHUNK_SIZE, sent before vLLM loads its model, nor its REGISTER, which waits for the GPU warm-up): the background
     * rounds stop after the one under way, so they take no core from the requests (any thread, never blocks). Runs on:
     * lmcache-request-loop, once.
     */
    public void firstRequest() {
        if (background != null) {
            background.stop("first request");
        }
    }

    /** For {@code /status} {@code jit_warmup}: the start-up's rounds, and under {@code background} what ran after ready. */
    public Map<String, Object> status() {
        Map<String, Object> out = startUp.toMap();
        if (background != null) {
            out.put("background", background.status());
        }
        return out;
    }

    /** Stops the background rounds and waits (bounded) for their scratch server to close. */
    @Override
    public void close() {
        if (background != null) {
            background.stop("server stopping");
            background.await(CLOSE_WAIT_NS);
        }
    }

    /** How long closing waits for a background round under way: a scratch round takes milliseconds. */
    private static final long CLOSE_WAIT_NS = TimeUnit.SECONDS.toNanos(2);

    /** The start-up's leftover rounds on {@code lmcache-warmup}, which closes the scratch server when they end. */
    private static final class Background {
        private final ScratchServer server;
        private final Rounds rounds;
        private final long budgetNs;
        private final int roundsBefore;
        private final int zeromqBefore;
        private volatile String stopReason;
        private volatile Result result;
        private volatile long startNs;
        private Thread thread;

        Background(ScratchServer server, Rounds rounds, long budgetNs) {
            this.server = server;
            this.rounds = rounds;
            this.budgetNs = budgetNs;
            roundsBefore = rounds.done();
            zeromqBefore = rounds.zeromqDone();
        }

        /** False (the scratch server closed, nothing runs) when no thread could be started. */
        boolean start() {
            startNs = System.nanoTime();
            try {
                // runs on: lmcache-warmup (one-shot, a daemon: it never holds the JVM up)
                thread = NamedThreads.thread("lmcache-warmup", true, this::run);
                thread.start();
                return true;
            } catch (RuntimeException | OutOfMemoryError e) {
                LOG.warn("JIT warm-up: no thread for its rounds after ready ({}); they are skipped", e.toString());
                server.close();
                return false;
            }
        }

        private void run() {
            Result ended;
            try {
                // every background round through the scratch request loop (connected at once where the start-up's were not)
                ended = rounds.run(startNs, budgetNs, 0, ScratchServer.Listen.IN_PROCESS, () -> stopReason);
            } catch (RuntimeException | Error e) {
                ended = new Result(rounds.done(), 0, 0, budgetNs, 0, "failed: " + e, rounds.zeromqDone(), null, server.loopbackConnections(),
                        rounds.scratchParts());
            } finally {
                server.close();
            }
            result = ended.timed(System.nanoTime() - startNs, 0);
            LOG.info("JIT warm-up in the background: {} rounds more ({} through ZeroMQ) in {} ms, {}", ended.rounds() - roundsBefore,
                    ended.zeromqRounds() - zeromqBefore, TimeUnit.NANOSECONDS.toMillis(result.elapsedNs()), ended.stoppedBy());
        }

        void stop(String reason) {
            if (stopReason == null) {
                stopReason = reason;
            }
            server.abandon();
        }

        void await(long timeoutNs) {
            NamedThreads.join(thread, timeoutNs);
        }

        Map<String, Object> status() {
            Result ended = result;
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("running", ended == null);
            out.put("iterations", (ended == null ? rounds.done() : ended.rounds()) - roundsBefore);
            out.put("zeromq_iterations", (ended == null ? rounds.zeromqDone() : ended.zeromqRounds()) - zeromqBefore);
            out.put("ms", TimeUnit.NANOSECONDS.toMillis(ended == null ? System.nanoTime() - startNs : ended.elapsedNs()));
            out.put("budget_ms", TimeUnit.NANOSECONDS.toMillis(budgetNs));
            out.put("stopped_by", ended == null ? null : ended.stoppedBy());
            return out;
        }
    }

    /**
     * 1, 2 and 4 chunks in turn, in consecutive and then in reversed blocks, each round a new prompt (its chunk hashes all
     * new), stored then retrieved into other blocks; a phase's first share of them straight to the dispatcher, the rest through
     * the scratch request loop. Rounds are run by one thread at a time (the start-up's, then lmcache-warmup's); their counts are
     * read by /status from any thread.
     */
    private static final class Rounds {
        private final ScratchServer server;
        private final ServerConfig config;
        private final int iterations;
        private final WarmupFrames frames = new WarmupFrames(ScratchServer.MODEL, ScratchServer.INSTANCE_ID);
        private final int[] tokens;
        private volatile int round;
        private volatile int zeromqRounds;
        private boolean connectTried;
        private String zeromqSkipped;

        Rounds(ScratchServer server, ServerConfig config, int iterations) {
            this.server = server;
            this.config = config;
            this.iterations = iterations;
            tokens = new int[ScratchServer.MAX_CHUNKS * server.chunkSize];
            SplittableRandom random = new SplittableRandom(30);
            for (int i = 0; i < tokens.length; i++) {
                tokens[i] = random.nextInt(150_000);
            }
        }

        int done() {
            return round;
        }

        int zeromqDone() {
            return zeromqRounds;
        }

        /**
         * Rounds until all are done, {@code budgetNs} from {@code startNs} is spent or {@code stop} names a reason; the first
         * {@code directShare} of the phase's rounds (and of its budget) go straight to the dispatcher, the rest through a
         * scratch request loop on {@code listen}'s endpoint.
         */
        Result run(long startNs, long budgetNs, double directShare, ScratchServer.Listen listen, Supplier<String> stop) {
            int phaseStart = round;
            while (round < iterations) {
                String stopped = stop.get();
                if (stopped != null) {
                    return result(stopped, budgetNs);
                }
                long nowNs = System.nanoTime();
                if (nowNs - startNs >= budgetNs) {
                    return result("budget", budgetNs);
                }
                if (!connectTried && (round - phaseStart >= (iterations - phaseStart) * directShare
                        || nowNs - startNs >= budgetNs * directShare)) {
                    connect(listen);
                }
                boolean throughLoop = server.throughLoop();
                String failed;
                try {
                    failed = round(startNs + budgetNs);
                } catch (ScratchServer.NoReply e) {
                    // a reply still out when the budget ran out (or the phase was told to stop): it ended mid-round
                    String stoppedMidRound = stop.get();
                    return result(stoppedMidRound != null ? stoppedMidRound : "budget", budgetNs);
                }
                if (failed != null) {
                    return result(failed, budgetNs);
                }
                if (throughLoop) {
                    zeromqRounds++;
                }
                round++;
            }
            return result("done", budgetNs);
        }

        private void connect(ScratchServer.Listen listen) {
            connectTried = true;
            String[] why = new String[1];
            if (!server.connect(config, frames, listen, why)) {
                zeromqSkipped = why[0];
            }
        }

        /**
         * Before ready, with rounds left for the background: a scratch loop on loopback TCP is replaced by an in-process one,
         * so no port of the warm-up's outlives ready (issue 45 N11); the background's rounds connect in-process at once.
         */
        void leaveLoopback() {
            if (server.throughLoop()) {
                connect(ScratchServer.Listen.IN_PROCESS);
            } else {
                connectTried = zeromqSkipped != null;
            }
        }

        /** One round, its replies awaited until {@code deadlineNs}; null, or what failed. */
        private String round(long deadlineNs) {
            int chunks = 1 << (round % 3);
            boolean reversed = (round / 3) % 2 == 1; // every chunk count with consecutive and with scattered blocks
            int count = chunks * server.blocksPerChunk;
            int end = chunks * server.chunkSize;
            tokens[0] = round; // a new prefix: every chunk hash of this round is new
            String request = "warmup-" + round;
            int[] stored = WarmupFrames.blocks(0, count, reversed);
            int[] retrieved = WarmupFrames.blocks(ScratchServer.MAX_CHUNKS * server.blocksPerChunk, count, reversed);
            if (!transferOk(server.call(frames.store(tokens, end, stored, request), deadlineNs))) {
                return "a scratch STORE failed";
            }
            server.call(frames.lookup(tokens, end, request), deadlineNs);
            server.call(frames.queryPrefetchStatus(request), deadlineNs);
            if (!transferOk(server.call(frames.retrieve(tokens, end, retrieved, request), deadlineNs))) {
                return "a scratch RETRIEVE failed";
            }
            server.call(frames.endSession(request), deadlineNs);
            server.call(frames.ping(), deadlineNs);
            if (server.storedObjects() > ScratchServer.MAX_CHUNKS) {
                server.clear();
            }
            return null;
        }

        private Result result(String stoppedBy, long budgetNs) {
            String skipped = zeromqSkipped != null ? zeromqSkipped : server.loopLost();
            return new Result(round, iterations, 0, budgetNs, 0, stoppedBy, zeromqDone(), skipped, server.loopbackConnections(),
                    scratchParts());
        }

        List<String> scratchParts() {
            return server.partsOpened();
        }
    }

    /** A STORE/RETRIEVE reply {@code (event, True)}. */
    private static boolean transferOk(byte[] payload) {
        return payload != null && payload.length > 0 && payload[payload.length - 1] == TRANSFER_OK_TAIL[0];
    }
}
