package io.lmcache.bench.copy;

import io.lmcache.bench.Machine;
import io.lmcache.server.agent.NamedThreads;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntConsumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The CPU (shared-memory) path against plain memory copies of the same bytes (issue 52), all in one run so the machine's
 * state hits both alike: one worker's STORE and RETRIEVE against one thread's copy, and {@code --workers} workers storing
 * (then retrieving) at once against {@code --baseline-threads} threads copying their bytes. Layout as bench/run-copy.sh's:
 * Llama-8B, 32 layers of FlashAttention NHD {@code [2, nb, 16, 8, 128]} bf16 (32 KiB block pieces), one shm segment a layer;
 * a request is {@code --chunks} chunks of 256 tokens. Blocks consecutive (merged into long pieces) or scattered (a random
 * permutation, 32 KiB pieces). Each round: the plain copies, then the timed requests (send to reply), then CLEAR.
 * Runs on the GPU host from a staged .device too (testclient/gpu/run-on-device.sh cpucopy): Java only.
 *
 * <p>Usage (bench/run-cpu-copy.sh): {@code CpuCopyBench [--rounds 10] [--warmup 3] [--workers 4] [--chunks 4]
 * [--baseline-threads <cores>] [--copy-threads auto,1] [--l1-size-gb 3] [--patterns consecutive,scattered] [--requests 1]
 * --out DIR}. {@code --requests N}: in the several-workers phase each worker sends N requests back to back (other prefixes), and
 * the baseline's threads copy their shares N times, so the figure is the workers' sustained bandwidth rather than one request's
 * start and end. After each server variant its /status is kept as {@code status-<copy threads>.json} (the request path's and the
 * handler's phase times, the copy runs per thread kind), and {@code workers-<copy threads>.csv} has each worker's send and reply
 * in every several-workers round, µs after the common start (how staggered the requests left and came back).
 * {@code --server-java-opts -Da=1,-Db=2}: JVM options of the server.
 */
public final class CpuCopyBench {
    private static final int CHUNK = 256;
    private static final int BLOCK = 16;
    /** One block's K (or V) in one layer: 16 tokens x 8 heads x 128 x bf16 = 32 KiB, the smallest piece the server copies. */
    private static final long BLOCK_PIECE_BYTES = (long) BLOCK * 8 * 128 * 2;
    private static final String MODEL = "bench/cpu-copy";

    /** One round's figures, GB/s (10^9 B/s); {@code nan} where not measured. */
    record Round(String copyThreads, String pattern, int round, double plainOne, double storeOne, double retrieveOne, double plainMany, double storeMany,
            double retrieveMany, double plainPieces) {}

    public static void main(String[] args) throws Exception {
        Map<String, String> options = parse(args);
        Settings settings = Settings.of(options);
        Path out = settings.out();
        Files.createDirectories(out);
        String machine = Machine.describe();
        System.out.println("# machine: " + machine);
        String load = Machine.loadAverages();
        List<Round> rounds = new ArrayList<>();
        StringBuilder verified = new StringBuilder();
        // each server variant (--copy-threads auto,1: after and before issue 52) measured in turn, against its own baselines
        for (String copyThreads : settings.copyThreads.split(",")) {
            verified.append(serverRun(settings, copyThreads.strip(), rounds));
        }
        String report = Report.markdown(settings, rounds, machine, load, verified.toString(), String.join(" ", args));
        Files.writeString(out.resolve("cpu-copy.md"), report);
        Files.writeString(out.resolve("cpu-copy-rounds.csv"), Report.csv(rounds));
        System.out.println(report);
    }

    /** One server with {@code --cpu-copy-threads copyThreads}: its workers, baselines and rounds; returns what it verified. */
    private static String serverRun(Settings settings, String copyThreads, List<Round> rounds) throws IOException {
        List<String> flags = new ArrayList<>(List.of("--l1-size-gb", settings.l1SizeGb, "--device", "host", "--cpu-copy-threads", copyThreads,
                "--worker-reap-timeout-seconds", "0"));
        flags.addAll(settings.serverArgs());
        // JAVA_TOOL_OPTIONS: the JVM of the server (started with java -jar) reads it, so -Dlmcache.* knobs reach it
        Map<String, String> env = settings.serverJavaOpts().isEmpty() ? Map.of() : Map.of("JAVA_TOOL_OPTIONS", settings.serverJavaOpts());
        try (ServerProcess server = ServerProcess.start(env, flags.toArray(String[]::new));
             Arena arena = Arena.ofShared()) {
            awaitPoolReady(server);
            List<JavaWorker> workers = new ArrayList<>();
            try {
                JavaWorker.Geometry geometry = new JavaWorker.Geometry(32, 2 * settings.blocks(), BLOCK, 8, 128);
                for (int w = 0; w < settings.workers; w++) {
                    JavaWorker worker = new JavaWorker(server.endpoint(), 100 + w, MODEL, geometry);
                    workers.add(worker);
                    worker.register();
                    worker.fill(JavaWorker.range(0, 2 * settings.blocks()), 7 + w);
                }
                try (Plain plain = new Plain(arena, settings.requestBytes(), settings.workers, settings.baselineThreads)) {
                    List<String> trace = new ArrayList<>(List.of("pattern,round,op,worker,sent_us,replied_us"));
                    String verified = new Run(settings, copyThreads, server, workers, plain, trace).all(rounds);
                    Files.write(settings.out().resolve("workers-" + copyThreads + ".csv"), trace);
                    Files.writeString(settings.out().resolve("status-" + copyThreads + ".json"), Http.get(server.httpBase() + "/status").body());
                    return verified;
                }
            } finally {
                workers.forEach(JavaWorker::close);
            }
        }
    }

    /** The run's settings, from the options. */
    record Settings(int rounds, int warmup, int workers, int requests, int chunks, int baselineThreads, String copyThreads, String l1SizeGb,
            List<String> patterns, List<String> serverArgs, String serverJavaOpts, Path out) {
        static Settings of(Map<String, String> o) {
            return new Settings(Integer.parseInt(o.getOrDefault("rounds", "10")), Integer.parseInt(o.getOrDefault("warmup", "3")),
                    Integer.parseInt(o.getOrDefault("workers", "4")), Integer.parseInt(o.getOrDefault("requests", "1")),
                    Integer.parseInt(o.getOrDefault("chunks", "4")),
                    Integer.parseInt(o.getOrDefault("baseline-threads", "" + Runtime.getRuntime().availableProcessors())),
                    o.getOrDefault("copy-threads", "auto,1"), o.getOrDefault("l1-size-gb", "3"),
                    List.of(o.getOrDefault("patterns", "consecutive,scattered").split(",")),
                    o.containsKey("server-args") ? List.of(o.get("server-args").split(",")) : List.of(),
                    o.getOrDefault("server-java-opts", "").replace(",-", " -").strip(), Path.of(o.getOrDefault("out", "bench/results/cpu-copy")));
        }

        int blocks() {
            return chunks * CHUNK / BLOCK;
        }

        /** One request's bytes: 32 layers, K and V, 32 KiB a block piece. */
        long requestBytes() {
            return 32L * 2 * blocks() * BLOCK_PIECE_BYTES;
        }

        /**
         * The longest piece the server copies in one call for the pattern: a chunk's K (or V) of one layer when its blocks are
         * consecutive in the tensor (16 blocks, 512 KiB, one pool object's span), one block (32 KiB) when they are scattered.
         */
        static long pieceBytes(String pattern) {
            return pattern.equals("consecutive") ? BLOCK_PIECE_BYTES * (CHUNK / BLOCK) : BLOCK_PIECE_BYTES;
        }
    }

    /** The timed rounds: per pattern, the warm-up rounds (untimed), then the measured ones. */
    private record Run(Settings settings, String copyThreads, ServerProcess server, List<JavaWorker> workers, Plain plain, List<String> trace) {
        String all(List<Round> rounds) {
            StringBuilder verified = new StringBuilder();
            long prefix = 1;
            for (String pattern : settings.patterns) {
                int[][] blocks = blocks(pattern);
                for (int r = -settings.warmup; r < settings.rounds; r++) {
                    Round round = round(pattern, r, blocks, prefix);
                    prefix += (long) settings.workers * settings.requests + 1;
                    if (r >= 0) {
                        rounds.add(round);
                        System.out.printf("copy threads %s, %s round %d: %s%n", copyThreads, pattern, r, round);
                    } else if (r == -1) {
                        verified.append(verify(pattern, blocks));
                    }
                }
            }
            return verified.toString();
        }

        /** Source blocks {@code [0]} and target blocks {@code [1]} of the pattern, the same for every worker. */
        private int[][] blocks(String pattern) {
            int n = settings.blocks();
            int[] all = JavaWorker.range(0, 2 * n);
            if (pattern.equals("scattered")) {
                Random random = new Random(42);
                for (int i = all.length - 1; i > 0; i--) {
                    int j = random.nextInt(i + 1);
                    int t = all[i];
                    all[i] = all[j];
                    all[j] = t;
                }
            } else if (!pattern.equals("consecutive")) {
                throw new IllegalArgumentException("pattern must be consecutive or scattered, got " + pattern);
            }
            return new int[][] {Arrays.copyOfRange(all, 0, n), Arrays.copyOfRange(all, n, 2 * n)};
        }

        private Round round(String pattern, int r, int[][] blocks, long prefix) {
            long bytes = settings.requestBytes();
            int tokens = settings.chunks * CHUNK;
            double plainOne = gbps(bytes, plain.one());
            JavaWorker first = workers.getFirst();
            int[] ids = JavaWorker.tokens(prefix, tokens);
            double storeOne = gbps(bytes, timed(() -> check(first.store(ids, 0, tokens, blocks[0], "s" + prefix), "STORE")));
            double retrieveOne = gbps(bytes, timed(() -> check(first.retrieve(ids, 0, tokens, blocks[1], 0, "s" + prefix), "RETRIEVE")));
            long manyBytes = bytes * workers.size() * settings.requests;
            double plainMany = gbps(manyBytes, plain.many(settings.requests, Long.MAX_VALUE));
            double plainPieces = gbps(manyBytes, plain.many(settings.requests, Settings.pieceBytes(pattern)));
            double storeMany = gbps(manyBytes, together(pattern + "," + r + ",store", w -> {
                for (int k = 0; k < settings.requests; k++) {
                    int[] own = JavaWorker.tokens(prefix + 1 + (long) w * settings.requests + k, tokens);
                    check(workers.get(w).store(own, 0, tokens, blocks[0], "m" + prefix + "-" + w + "-" + k), "STORE");
                }
            }));
            double retrieveMany = gbps(manyBytes, together(pattern + "," + r + ",retrieve", w -> {
                for (int k = 0; k < settings.requests; k++) {
                    int[] own = JavaWorker.tokens(prefix + 1 + (long) w * settings.requests + k, tokens);
                    check(workers.get(w).retrieve(own, 0, tokens, blocks[1], 0, "m" + prefix + "-" + w + "-" + k), "RETRIEVE");
                }
            }));
            first.client().call(20, TestClient.pack(p -> p.packBoolean(false))); // CLEAR: the next round writes memory used before
            return new Round(copyThreads, pattern, r, plainOne, storeOne, retrieveOne, plainMany, storeMany, retrieveMany, plainPieces);
        }

        /** After the warm-up: each worker's last RETRIEVE gave back exactly the bytes it stored. */
        private String verify(String pattern, int[][] blocks) {
            for (JavaWorker worker : workers) {
                if (!Arrays.equals(worker.read(blocks[0]), worker.read(blocks[1]))) {
                    throw new AssertionError(pattern + ": a RETRIEVE gave back other bytes than were stored");
                }
            }
            return "--cpu-copy-threads " + copyThreads + ", " + pattern + ": " + workers.size() + " workers' retrieved bytes equal the stored ones. ";
        }

        /** Every worker's request at once (each on its own thread); nanoseconds from the start to the last reply. */
        private long together(String label, IntConsumer request) {
            CountDownLatch go = new CountDownLatch(1);
            AtomicLong lastNs = new AtomicLong();
            long[] sentNs = new long[workers.size()];
            long[] repliedNs = new long[workers.size()];
            List<Thread> threads = new ArrayList<>();
            AtomicLong failures = new AtomicLong();
            for (int w = 0; w < workers.size(); w++) {
                int worker = w;
                // runs on: bench-worker-N, one request then ends
                Thread thread = NamedThreads.thread("bench-worker-" + w, true, () -> {
                    try {
                        go.await();
                        sentNs[worker] = System.nanoTime();
                        request.accept(worker);
                        repliedNs[worker] = System.nanoTime();
                        lastNs.accumulateAndGet(repliedNs[worker], Math::max);
                    } catch (InterruptedException | RuntimeException | AssertionError e) {
                        failures.incrementAndGet();
                        e.printStackTrace();
                    }
                });
                threads.add(thread);
                thread.start();
            }
            sleepMs(20); // every thread waits at the latch
            long startNs = System.nanoTime();
            go.countDown();
            for (Thread thread : threads) {
                NamedThreads.join(thread, TimeUnit.MINUTES.toNanos(2));
            }
            if (failures.get() > 0) {
                throw new IllegalStateException(failures.get() + " concurrent request(s) failed");
            }
            for (int w = 0; w < workers.size(); w++) {
                trace.add(String.format(Locale.ROOT, "%s,%d,%.1f,%.1f", label, w, (sentNs[w] - startNs) / 1e3, (repliedNs[w] - startNs) / 1e3));
            }
            return lastNs.get() - startNs;
        }
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(what + " answered False");
        }
    }

    private static long timed(Runnable request) {
        long startNs = System.nanoTime();
        request.run();
        return System.nanoTime() - startNs;
    }

    static double gbps(long bytes, long ns) {
        return bytes / (double) ns;
    }

    static void sleepMs(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Waits until every pool region is prepared: the preparation would compete with the timed copies for the CPU. */
    private static void awaitPoolReady(ServerProcess server) {
        Pattern total = Pattern.compile("\"regions_total\"\\s*:\\s*(\\d+)");
        Pattern prepared = Pattern.compile("\"regions_prepared\"\\s*:\\s*(\\d+)");
        long deadlineNs = System.nanoTime() + TimeUnit.MINUTES.toNanos(5);
        while (System.nanoTime() < deadlineNs) {
            String status = Http.get(server.httpBase() + "/status").body();
            Matcher t = total.matcher(status);
            Matcher p = prepared.matcher(status);
            if (t.find() && p.find() && t.group(1).equals(p.group(1))) {
                return;
            }
            sleepMs(200);
        }
        throw new IllegalStateException("the pool was not prepared after 5 minutes");
    }

    /** The baselines: plain copies between two shm mappings, one thread, and the workers' bytes over several threads. */
    static final class Plain implements AutoCloseable {
        private final MemorySegment from;
        private final MemorySegment to;
        private final long bytes;
        private final int workers;
        private final int threads;
        private final List<Path> files = new ArrayList<>();

        Plain(Arena arena, long bytes, int workers, int threads) throws IOException {
            this.bytes = bytes;
            this.workers = workers;
            this.threads = threads;
            this.from = map(arena, bytes * workers);
            this.to = map(arena, bytes * workers);
            from.fill((byte) 1);
            to.fill((byte) 2);
        }

        private MemorySegment map(Arena arena, long size) throws IOException {
            Path file = Files.createTempFile(Path.of("/dev/shm"), "lmcache_bench_plain_", "");
            files.add(file);
            try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                channel.truncate(0);
                channel.write(ByteBuffer.allocate(1), size - 1);
                return channel.map(FileChannel.MapMode.READ_WRITE, 0, size, arena);
            }
        }

        /** One request's bytes, one thread: nanoseconds. */
        long one() {
            long startNs = System.nanoTime();
            MemorySegment.copy(from, 0, to, 0, bytes);
            return System.nanoTime() - startNs;
        }

        /**
         * Every worker's bytes over {@code threads} threads, each copying its contiguous share {@code times} times in calls of at most
         * {@code pieceBytes}: nanoseconds from start to the last. One call per share is the host's best: the JVM's copy switches
         * to non-temporal stores (no read of the destination lines first) from 2.5 MB a call, which a request's pieces never reach.
         */
        long many(int times, long pieceBytes) {
            long total = bytes * workers;
            long share = (total / threads + 4095) & ~4095L;
            CountDownLatch go = new CountDownLatch(1);
            AtomicLong lastNs = new AtomicLong();
            List<Thread> list = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                long start = Math.min(total, t * share);
                long length = Math.min(total, start + share) - start;
                // runs on: bench-plain-N, one share then ends
                Thread thread = NamedThreads.thread("bench-plain-" + t, true, () -> {
                    try {
                        go.await();
                    } catch (InterruptedException e) {
                        return;
                    }
                    for (int k = 0; k < times; k++) {
                        for (long at = start; at < start + length; at += Math.min(pieceBytes, start + length - at)) {
                            MemorySegment.copy(from, at, to, at, Math.min(pieceBytes, start + length - at));
                        }
                    }
                    lastNs.accumulateAndGet(System.nanoTime(), Math::max);
                });
                list.add(thread);
                thread.start();
            }
            sleepMs(20);
            long startNs = System.nanoTime();
            go.countDown();
            for (Thread thread : list) {
                NamedThreads.join(thread, TimeUnit.MINUTES.toNanos(1));
            }
            return lastNs.get() - startNs;
        }

        @Override
        public void close() throws IOException {
            for (Path file : files) {
                Files.deleteIfExists(file);
            }
        }
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> options = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("usage: CpuCopyBench [--rounds N] [--warmup N] [--workers N] [--chunks N]"
                        + " [--baseline-threads N] [--copy-threads auto,1] [--l1-size-gb G] [--patterns consecutive,scattered]"
                        + " [--requests N] [--server-args --flag=value,...] [--server-java-opts -Dname=value,...] --out DIR;"
                        + " got " + args[i]);
            }
            options.put(args[i].substring(2), args[++i]);
        }
        return options;
    }
}
