package io.lmcache.bench.l2;

import static io.lmcache.bench.l2.BenchChecks.check;
import static io.lmcache.bench.l2.BenchChecks.gbs;
import static io.lmcache.server.testing.TestClient.pack;

import io.lmcache.bench.Machine;
import io.lmcache.bench.ResultsFile;
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
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.Stream;

/**
 * fs_native on this machine's disk (bench/RESULTS.md#l2-tiers): write-through and prefetch rates
 * next to raw FileChannel writes and reads of the same files in the same run, and what an L1 miss
 * that hits L2 adds to a LOOKUP. Page caches are dropped before each read figure when the kernel lets
 * us, so reads come from the disk; writes are not synced (fs_native does not sync either).
 *
 * <p>{@code bench/run-l2.sh [--chunks 64] [--iterations 100] [--dir /var/tmp] [--results bench/RESULTS.md]}
 */
public final class L2Bench {
    private static final int CHUNK = 256;
    /** 8 layers of FlashAttention NHD [2, nb, 16, 8, 128] bf16: 32 KiB pieces, 8 MiB chunk objects (a Llama-8B-class layout cut to 8 layers). */
    private static final int LAYERS = 8;
    private static final String MODEL = "bench/l2-model";
    private static final int[] WARM_UP = JavaWorker.tokens(41, 8 * CHUNK);
    /** QUERY_PREFETCH_STATUS is polled this often: back-to-back polls would take the CPU the prefetch needs on a small machine. */
    private static final long POLL_NS = 100_000;

    private L2Bench() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            options.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        int chunks = Integer.parseInt(options.getOrDefault("chunks", "64"));
        int iterations = Integer.parseInt(options.getOrDefault("iterations", "100"));
        Path results = Path.of(options.getOrDefault("results", "bench/RESULTS.md"));
        Path dir = Files.createTempDirectory(Path.of(options.getOrDefault("dir", "/var/tmp")), "lmcache-l2-bench-");
        try {
            run(chunks, iterations, dir, results, ("bench/run-l2.sh " + String.join(" ", args)).trim());
        } finally {
            try (Stream<Path> walk = Files.walk(dir)) {
                for (Path path : walk.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(path);
                }
            }
        }
    }

    private static void run(int chunks, int iterations, Path dir, Path results, String command) throws Exception {
        JavaWorker.Geometry geometry = new JavaWorker.Geometry(LAYERS, Math.max(chunks, WARM_UP.length / CHUNK) * CHUNK / 16 + 32, 16, 8, 128);
        long objectBytes = geometry.chunkObjectBytes(CHUNK);
        long totalBytes = chunks * objectBytes;
        int[] blocks = JavaWorker.range(0, chunks * CHUNK / 16);
        int[] tokens = JavaWorker.tokens(42, chunks * CHUNK);
        String adapter = "{\"type\":\"fs_native\",\"base_path\":\"" + dir.resolve("l2") + "\"}";
        String[] serverArgs = {"--l1-size-gb", "2", "--l2-adapter", adapter};
        String loadBefore = Machine.loadAverages();
        String machine = Machine.describe();
        boolean dropped;
        double writeThroughS;
        double l1StoreS;
        double prefetchS;
        long hits;
        Latency latency;
        double foreign;
        long self = ProcessHandle.current().pid();
        try (ServerProcess server = ServerProcess.start(serverArgs)) {
            awaitPool(server);
            Machine.CpuSample cpuBefore = Machine.CpuSample.take(server.pid(), self);
            try (JavaWorker worker = new JavaWorker(server.endpoint(), 1, MODEL, geometry)) {
                worker.register();
                worker.fill(blocks, 7);
                // warm-up (the JIT, the classes of the write path): a prompt of its own, written through before the timed one
                check(worker.store(WARM_UP, 0, WARM_UP.length, JavaWorker.range(0, WARM_UP.length / 16), "warm-up"), "warm-up STORE");
                awaitFiles(dir.resolve("l2"), WARM_UP.length / CHUNK);
                sync(); // the warm-up's dirty pages are not flushed during the timed writes
                long t0 = System.nanoTime();
                check(worker.store(tokens, 0, chunks * CHUNK, blocks, "write"), "STORE");
                long t1 = System.nanoTime();
                // a file appears when its rename lands, i.e. when it is whole: a cheap completion signal that takes no server CPU
                awaitFiles(dir.resolve("l2"), WARM_UP.length / CHUNK + chunks);
                long t2 = System.nanoTime();
                l1StoreS = (t1 - t0) / 1e9;
                writeThroughS = (t2 - t1) / 1e9;
                foreign = Machine.CpuSample.take(server.pid(), self).foreignCoresSince(cpuBefore);
            }
        }
        sync();
        double rawWriteS = rawWrite(dir.resolve("raw"), chunks, objectBytes);
        try (ServerProcess server = ServerProcess.start(serverArgs)) {
            awaitPool(server);
            Machine.CpuSample cpuBefore = Machine.CpuSample.take(server.pid(), self);
            try (JavaWorker worker = new JavaWorker(server.endpoint(), 2, MODEL, geometry)) {
                worker.register();
                check(lookup(worker, WARM_UP, WARM_UP.length, "warm-up") == WARM_UP.length / CHUNK, "the warm-up prompt hits L2");
                worker.endSession("warm-up");
                dropped = dropCaches();
                long t0 = System.nanoTime();
                hits = lookup(worker, tokens, chunks * CHUNK, "prefetch");
                prefetchS = (System.nanoTime() - t0) / 1e9;
                check(hits == chunks, "all " + chunks + " chunks hit from L2, got " + hits);
                int[] target = JavaWorker.range(0, CHUNK / 16);
                worker.zero(target);
                check(worker.retrieve(tokens, 0, CHUNK, target, 0, "prefetch"), "RETRIEVE of chunk 0");
                worker.endSession("prefetch");
                latency = latency(server, worker, tokens, iterations);
            }
            foreign = Math.max(foreign, Machine.CpuSample.take(server.pid(), self).foreignCoresSince(cpuBefore));
        }
        double rawReadS = dropCaches() == dropped ? rawRead(dir.resolve("raw"), chunks, objectBytes) : Double.NaN;
        write(results, new Machine.Run(command, machine, loadBefore, foreign), new Prompt(chunks, objectBytes, totalBytes),
                new Times(l1StoreS, writeThroughS, rawWriteS, prefetchS, rawReadS, dropped), latency, iterations);
    }

    /** The prompt stored: its chunks, the bytes of one chunk object and of all of them. */
    private record Prompt(int chunks, long objectBytes, long totalBytes) {}

    /** Seconds of the STORE into L1, the write-through, the raw writes, the prefetch and the raw reads; whether caches were dropped. */
    private record Times(double l1StoreS, double writeThroughS, double rawWriteS, double prefetchS, double rawReadS, boolean dropped) {}

    private record Latency(double l1HitMedianUs, double l2HitMedianUs, double l1HitP90Us, double l2HitP90Us) {}

    /** LOOKUP until QUERY_PREFETCH_STATUS answers, of a one-chunk prefix: in L1, and (after END_SESSION freed the loaded copy) in L2 only. */
    private static Latency latency(ServerProcess server, JavaWorker worker, int[] tokens, int iterations) throws Exception {
        int[] other = JavaWorker.tokens(43, CHUNK);
        int[] first = Arrays.copyOf(tokens, CHUNK); // the stored prompt's first chunk, in a key as short as the L1 one

        check(worker.store(other, 0, CHUNK, JavaWorker.range(0, CHUNK / 16), "l1"), "STORE of the L1 prompt");
        double[] l1 = new double[iterations];
        double[] l2 = new double[iterations];
        for (int i = 0; i < iterations; i++) {
            long t0 = System.nanoTime();
            check(lookup(worker, other, CHUNK, "l1-" + i) == 1, "an L1 hit");
            l1[i] = (System.nanoTime() - t0) / 1e3;
            worker.endSession("l1-" + i);
        }
        for (int i = 0; i < iterations; i++) {
            long t0 = System.nanoTime();
            check(lookup(worker, first, CHUNK, "l2-" + i) == 1, "an L2 hit");
            l2[i] = (System.nanoTime() - t0) / 1e3;
            worker.endSession("l2-" + i); // the loaded copy is temporary: gone with its lock, so the next one misses L1 again
        }
        Arrays.sort(l1);
        Arrays.sort(l2);
        check(Http.metric(server, "lmcache_mp_lookup_hit_l2_keys_total") >= iterations, "the L2 LOOKUPs loaded from L2");
        return new Latency(l1[iterations / 2], l2[iterations / 2], l1[iterations * 9 / 10], l2[iterations * 9 / 10]);
    }

    /** LOOKUP as the scheduler sends it, then QUERY_PREFETCH_STATUS until it answers a count. */
    private static int lookup(JavaWorker worker, int[] tokens, int end, String requestId) {
        TestClient client = worker.client();
        client.call(8, worker.key(tokens, 0, end, requestId, null, 1, 1), pack(p -> p.packInt(1)));
        while (true) {
            TestClient.Reply reply = client.call(9, pack(p -> p.packString(requestId)));
            if (reply.payload() != null) {
                return Integer.parseInt(reply.payloadHex(), 16);
            }
            LockSupport.parkNanos(POLL_NS);
        }
    }

    private static void awaitFiles(Path dir, int count) throws IOException, InterruptedException {
        long deadlineNs = System.nanoTime() + 120_000_000_000L;
        while (true) {
            try (Stream<Path> files = Files.list(dir)) {
                if (files.filter(f -> f.toString().endsWith(".data")).count() >= count) {
                    return;
                }
            }
            check(deadlineNs - System.nanoTime() > 0, count + " files written within 120 s");
            Thread.sleep(1);
        }
    }

    private static void awaitPool(ServerProcess server) throws InterruptedException {
        long deadlineNs = System.nanoTime() + 120_000_000_000L;
        while (Http.metric(server, "lmcache_mp_l1_memory_ready_bytes") < Http.metric(server, "lmcache_mp_l1_memory_total_bytes")) {
            check(deadlineNs - System.nanoTime() > 0, "the L1 pool is ready within 120 s");
            Thread.sleep(50);
        }
    }

    /** The same bytes as fs_native writes: one file per chunk object, written from native memory, not synced. */
    private static double rawWrite(Path dir, int chunks, long objectBytes) throws IOException {
        Files.createDirectories(dir);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment object = arena.allocate(objectBytes, 4096);
            byte[] noise = new byte[(int) objectBytes];
            ThreadLocalRandom.current().nextBytes(noise);
            object.copyFrom(MemorySegment.ofArray(noise));
            long t0 = System.nanoTime();
            for (int i = 0; i < chunks; i++) {
                try (FileChannel channel = FileChannel.open(dir.resolve(i + ".data"), StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                    ByteBuffer buffer = object.asByteBuffer();
                    while (buffer.hasRemaining()) {
                        channel.write(buffer);
                    }
                }
            }
            return (System.nanoTime() - t0) / 1e9;
        }
    }

    private static double rawRead(Path dir, int chunks, long objectBytes) throws IOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment object = arena.allocate(objectBytes, 4096);
            long t0 = System.nanoTime();
            for (int i = 0; i < chunks; i++) {
                try (FileChannel channel = FileChannel.open(dir.resolve(i + ".data"), StandardOpenOption.READ)) {
                    ByteBuffer buffer = object.asByteBuffer();
                    while (buffer.hasRemaining() && channel.read(buffer) >= 0) {
                        continue;
                    }
                }
            }
            return (System.nanoTime() - t0) / 1e9;
        }
    }

    private static void sync() throws IOException, InterruptedException {
        new ProcessBuilder("sync").inheritIO().start().waitFor();
    }

    /** sync, then drop the page cache (root only): the next reads come from the disk. False when the kernel refuses. */
    private static boolean dropCaches() {
        try {
            sync();
            Files.writeString(Path.of("/proc/sys/vm/drop_caches"), "3");
            return true;
        } catch (IOException | InterruptedException e) {
            return false;
        }
    }

    private static void write(Path results, Machine.Run run, Prompt prompt, Times times, Latency latency, int iterations) {
        int chunks = prompt.chunks();
        long objectBytes = prompt.objectBytes();
        long totalBytes = prompt.totalBytes();
        double l1StoreS = times.l1StoreS();
        double writeThroughS = times.writeThroughS();
        double rawWriteS = times.rawWriteS();
        double prefetchS = times.prefetchS();
        double rawReadS = times.rawReadS();
        boolean dropped = times.dropped();
        StringBuilder md = new StringBuilder();
        Machine.sectionHead(md, "L2: fs_native on this machine's disk", run);
        md.append(String.format(Locale.ROOT, "One prompt of %d chunks (%d MiB chunk objects: 8 layers of FlashAttention NHD `[2, nb, 16, 8, 128]`"
                + " bf16, %d MiB in all), one CPU worker, `--l1-size-gb 2 --l2-adapter '{\"type\":\"fs_native\",\"base_path\":...}'` (4 I/O"
                + " workers, buffered I/O) on ext4 under /var/tmp. Write-through: from the STORE's reply (its objects are committed and queued"
                + " for L2 by then; the STORE's own copy into L1 took %.3f s) until all %d files were in place (a file appears when its"
                + " rename lands, whole). Prefetch: a"
                + " restarted server (empty L1, same base_path) from the LOOKUP until QUERY_PREFETCH_STATUS answered %d, i.e. hashing, L2"
                + " look-ups, reservations and reads. Raw: the same number of files of the same size written and read one after another with FileChannel"
                + " in this JVM (dd-style, one thread; fs_native spreads a task's objects over its 4 I/O threads), in the same run; each"
                + " timed write starts after a sync. Page cache %s before each read figure; writes are not synced, as fs_native does not sync.%n%n",
                chunks, objectBytes >> 20, totalBytes >> 20, l1StoreS, chunks, chunks, dropped ? "dropped (sync; drop_caches 3)" : "NOT dropped"));
        md.append("| figure | fs_native | raw FileChannel | fs_native / raw |\n|---|---:|---:|---:|\n");
        md.append(String.format(Locale.ROOT, "| write-through, GB/s | %s | %s | %.2f |%n", gbs(totalBytes, writeThroughS), gbs(totalBytes, rawWriteS),
                rawWriteS / writeThroughS));
        md.append(String.format(Locale.ROOT, "| prefetch (read), GB/s | %s | %s | %.2f |%n%n", gbs(totalBytes, prefetchS), gbs(totalBytes, rawReadS),
                rawReadS / prefetchS));
        md.append(ResultsFile.DETAILS).append("\n\n");
        md.append(String.format(Locale.ROOT, "LOOKUP of a one-chunk prefix until QUERY_PREFETCH_STATUS answers, %d"
                + " times each (all the L1 hits, then all the L2 ones), page cache warm: an L1 hit, and an L1 miss that loads the %d MiB"
                + " object from L2 (END_SESSION after each frees the temporary copy, so every one misses L1), after a warm-up prompt of 8"
                + " chunks in each server. The client polls every 100 µs.%n%n", iterations, objectBytes >> 20));
        md.append("| LOOKUP | median µs | p90 µs |\n|---|---:|---:|\n");
        md.append(String.format(Locale.ROOT, "| L1 hit | %.0f | %.0f |%n", latency.l1HitMedianUs(), latency.l1HitP90Us()));
        md.append(String.format(Locale.ROOT, "| L1 miss, L2 hit | %.0f | %.0f |%n", latency.l2HitMedianUs(), latency.l2HitP90Us()));
        md.append(String.format(Locale.ROOT, "| added by L2 | %.0f | |%n", latency.l2HitMedianUs() - latency.l1HitMedianUs()));
        ResultsFile.writeSection(results, "l2", md.toString());
        System.out.println(md);
    }
}
