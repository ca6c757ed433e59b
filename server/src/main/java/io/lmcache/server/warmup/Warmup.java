package io.lmcache.server.warmup;

import io.lmcache.server.config.ServerConfig;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The JIT warm-up at start-up (issue 30): while the pool's first region is being prepared, runs the request path a fresh
 * server would otherwise interpret for its first hundreds of requests (a worker's STORE, the scheduler's LOOKUP and
 * QUERY_PREFETCH_STATUS, the RETRIEVE, END_SESSION: decode, chunk hashing, planning, reservations, the host copy, the
 * KV-event commit, lookup and lock, the reply's encoding; in the second half of the rounds also the ZeroMQ path: JeroMQ's
 * engines and the request loop) on a {@link ScratchServer}, until C2 has compiled it. JDK 25's
 * ahead-of-time cache keeps no compiled code (JEP 515 only its profiles), so this is what makes the first requests fast.
 * Nothing real is touched: the scratch server has its own metrics, store, memory, event log and threads, and is closed before
 * the server is ready. Rounds run until {@code --warmup-iterations} are done or the time budget is spent.
 */
public final class Warmup {
    private static final Logger LOG = LoggerFactory.getLogger(Warmup.class);
    private static final byte[] TRANSFER_OK_TAIL = {(byte) 0xc3};

    /**
     * The share of the rounds (and of the budget) that go straight to the scratch dispatcher before the rest take the ZeroMQ
     * path: a round through the loopback loop costs several times a direct one (JeroMQ's I/O threads and the loop's wake-ups
     * at both ends), so half the budget gives the handlers more rounds and the ZeroMQ path enough to be compiled. Measured
     * on the H200 against no direct rounds and against three quarters direct (bench/RESULTS.md, session of 2026-12-02
     * afternoon).
     */
    private static final double DIRECT_SHARE = 0.5;

    /**
     * What ran, for {@code /status} ({@code jit_warmup}) and the start-up log.
     *
     * @param rounds rounds done (each: STORE, LOOKUP, QUERY_PREFETCH_STATUS, RETRIEVE, END_SESSION)
     * @param requested rounds asked for ({@code --warmup-iterations}; 0: off)
     * @param elapsedNs wall time of the warm-up, the scratch server's opening and closing included
     * @param stoppedBy "done", "budget" (the time budget ran out first), "off", or why it stopped early
     * @param zeromqRounds of the rounds, those whose requests took the ZeroMQ path (a client's DEALER to the scratch server's
     *     own request loop on a loopback port); the others went straight to its dispatcher
     * @param zeromqSkipped why no round took the ZeroMQ path (its loop could not be opened), or null
     */
    public record Result(int rounds, int requested, long elapsedNs, long budgetNs, long openNs, String stoppedBy, int zeromqRounds,
            String zeromqSkipped) {
        public static final Result OFF = new Result(0, 0, 0, 0, 0, "off", 0, null);

        public Map<String, Object> toMap() {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("ran", rounds > 0);
            out.put("iterations", rounds);
            out.put("iterations_requested", requested);
            out.put("requests", 5L * rounds);
            out.put("zeromq_iterations", zeromqRounds);
            if (zeromqSkipped != null) {
                out.put("zeromq_skipped", zeromqSkipped);
            }
            out.put("ms", TimeUnit.NANOSECONDS.toMillis(elapsedNs));
            out.put("budget_ms", TimeUnit.NANOSECONDS.toMillis(budgetNs));
            out.put("scratch_open_ms", TimeUnit.NANOSECONDS.toMillis(openNs));
            out.put("stopped_by", stoppedBy);
            return out;
        }

        private Result timed(long elapsedNs, long openNs) {
            return new Result(rounds, requested, elapsedNs, budgetNs, openNs, stoppedBy, zeromqRounds, zeromqSkipped);
        }
    }

    private Warmup() {}

    /** Runs the warm-up on this thread; never throws (a failure ends it early and says why in the result). */
    public static Result run(ServerConfig config, Object poolFileKey) {
        int iterations = config.operator().warmupIterations();
        long budgetNs = config.operator().warmupBudgetNs();
        if (iterations == 0 || budgetNs == 0) {
            return Result.OFF;
        }
        long startNs = System.nanoTime();
        String[] why = new String[1];
        Result result;
        long openNs = 0;
        try (ScratchServer server = ScratchServer.open(config, poolFileKey, why)) {
            if (server == null) {
                result = new Result(0, iterations, 0, budgetNs, 0, "skipped: " + why[0], 0, null);
            } else {
                openNs = System.nanoTime() - startNs;
                result = new Rounds(server, config, iterations, startNs, budgetNs).run();
            }
        } catch (RuntimeException | Error e) {
            result = new Result(0, iterations, 0, budgetNs, 0, "failed: " + e, 0, null);
        }
        Result done = result.timed(System.nanoTime() - startNs, openNs);
        LOG.info("JIT warm-up: {} of {} rounds ({} requests on a scratch store, {} rounds through ZeroMQ{}) in {} ms ({} ms to open it), {}",
                done.rounds(), iterations, 5L * done.rounds(), done.zeromqRounds(),
                done.zeromqSkipped() == null ? "" : ": " + done.zeromqSkipped(), TimeUnit.NANOSECONDS.toMillis(done.elapsedNs()),
                TimeUnit.NANOSECONDS.toMillis(done.openNs()), done.stoppedBy());
        return done;
    }

    /**
     * 1, 2 and 4 chunks in turn, each round a new prompt (its chunk hashes all new), stored then retrieved into other blocks;
     * the first {@link #DIRECT_SHARE} of them straight to the dispatcher, the rest through the scratch request loop.
     */
    private static final class Rounds {
        private final ScratchServer server;
        private final ServerConfig config;
        private final int iterations;
        private final long startNs;
        private final long budgetNs;
        private final WarmupFrames frames = new WarmupFrames(ScratchServer.MODEL, ScratchServer.INSTANCE_ID);
        private final int[] tokens;
        private int round;
        private int zeromqFrom = -1;
        private String zeromqSkipped;

        Rounds(ScratchServer server, ServerConfig config, int iterations, long startNs, long budgetNs) {
            this.server = server;
            this.config = config;
            this.iterations = iterations;
            this.startNs = startNs;
            this.budgetNs = budgetNs;
            tokens = new int[ScratchServer.MAX_CHUNKS * server.chunkSize];
            SplittableRandom random = new SplittableRandom(30);
            for (int i = 0; i < tokens.length; i++) {
                tokens[i] = random.nextInt(150_000);
            }
        }

        Result run() {
            while (round < iterations) {
                long nowNs = System.nanoTime();
                if (nowNs - startNs >= budgetNs) {
                    return result("budget");
                }
                if (zeromqFrom < 0 && zeromqSkipped == null && (round >= iterations * DIRECT_SHARE
                        || nowNs - startNs >= budgetNs * DIRECT_SHARE)) {
                    connect();
                }
                String failed;
                try {
                    failed = round();
                } catch (ScratchServer.NoReply e) {
                    return result("budget"); // a reply still out when it ran out: the budget ended the warm-up mid-round
                }
                if (failed != null) {
                    return result(failed);
                }
                round++;
            }
            return result("done");
        }

        private void connect() {
            String[] why = new String[1];
            if (server.connect(config, why)) {
                zeromqFrom = round;
            } else {
                zeromqSkipped = why[0];
            }
        }

        /** One round; null, or what failed. */
        private String round() {
            int chunks = 1 << (round % 3);
            int end = chunks * server.chunkSize;
            tokens[0] = round; // a new prefix: every chunk hash of this round is new
            String request = "warmup-" + round;
            int[] stored = blocks(0, chunks * server.blocksPerChunk);
            int[] retrieved = blocks(ScratchServer.MAX_CHUNKS * server.blocksPerChunk, chunks * server.blocksPerChunk);
            long deadlineNs = startNs + budgetNs;
            if (!transferOk(server.call(frames.store(tokens, end, stored, request), deadlineNs))) {
                return "a scratch STORE failed";
            }
            server.call(frames.lookup(tokens, end, request), deadlineNs);
            server.call(frames.queryPrefetchStatus(request), deadlineNs);
            if (!transferOk(server.call(frames.retrieve(tokens, end, retrieved, request), deadlineNs))) {
                return "a scratch RETRIEVE failed";
            }
            server.call(frames.endSession(request), deadlineNs);
            if (server.storedObjects() > ScratchServer.MAX_CHUNKS) {
                server.clear();
            }
            return null;
        }

        private Result result(String stoppedBy) {
            return new Result(round, iterations, 0, budgetNs, 0, stoppedBy, zeromqFrom < 0 ? 0 : round - zeromqFrom, zeromqSkipped);
        }
    }

    private static int[] blocks(int from, int count) {
        int[] out = new int[count];
        for (int i = 0; i < count; i++) {
            out[i] = from + i;
        }
        return out;
    }

    /** A STORE/RETRIEVE reply {@code (event, True)}. */
    private static boolean transferOk(byte[] payload) {
        return payload != null && payload.length > 0 && payload[payload.length - 1] == TRANSFER_OK_TAIL[0];
    }
}
