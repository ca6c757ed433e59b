package io.lmcache.bench.l2;

import static io.lmcache.bench.l2.BenchChecks.check;
import static io.lmcache.bench.l2.BenchChecks.gbs;
import static io.lmcache.server.testing.TestClient.pack;

import io.lettuce.core.RedisFuture;
import io.lettuce.core.RedisURI;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.codec.RedisCodec;
import io.lettuce.core.codec.StringCodec;
import io.lmcache.bench.Machine;
import io.lmcache.bench.ResultsFile;
import io.lmcache.server.l2.testing.RedisNodes;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.JavaWorker;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Pattern;

/**
 * The valkey adapter on a local 3-master Redis cluster (bench/RESULTS.md#l2-tiers): write-through
 * and load rates of 32 MiB chunk objects through the server, next to a plain Lettuce SET/GET loop of
 * the same number of objects of the same size in the same run, and redis-benchmark's own figure.
 *
 * <p>{@code bench/run-redis.sh [--chunks 16] [--results bench/RESULTS.md]}
 */
public final class RedisBench {
    private static final int CHUNK = 256;
    /** 32 layers of FlashAttention NHD [2, nb, 16, 8, 128] bf16: 32 KiB pieces, 32 MiB chunk objects (a Llama-8B layout). */
    private static final int LAYERS = 32;
    private static final String MODEL = "bench/redis-model";
    private static final int WARM_UP_CHUNKS = 2;
    private static final long POLL_NS = 100_000;
    private static final long WAIT_NS = TimeUnit.SECONDS.toNanos(120);

    private RedisBench() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            options.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        int chunks = Integer.parseInt(options.getOrDefault("chunks", "16"));
        Path results = Path.of(options.getOrDefault("results", "bench/RESULTS.md"));
        String loadBefore = Machine.loadAverages();
        String machine = Machine.describe();
        try (RedisNodes cluster = RedisNodes.cluster(3)) {
            run(cluster, chunks, results, ("bench/run-redis.sh " + String.join(" ", args)).trim(), machine, loadBefore);
        }
    }

    /** What one run measured, in seconds. */
    private record Figures(double l1StoreS, double writeThroughS, double prefetchS, double plainSetS, double plainGetS, double foreignCores) {}

    private static void run(RedisNodes cluster, int chunks, Path results, String command, String machine, String loadBefore)
            throws Exception {
        JavaWorker.Geometry geometry = new JavaWorker.Geometry(LAYERS, (chunks + WARM_UP_CHUNKS) * CHUNK / 16 + 16, 16, 8, 128);
        long objectBytes = geometry.chunkObjectBytes(CHUNK);
        int[] warmUp = JavaWorker.tokens(51, WARM_UP_CHUNKS * CHUNK);
        int[] tokens = JavaWorker.tokens(52, chunks * CHUNK);
        int[] blocks = JavaWorker.range(0, chunks * CHUNK / 16);
        String adapter = "{\"type\":\"valkey\",\"startup_nodes\":\"" + cluster.startupNodes() + "\",\"cluster_mode\":true}";
        long self = ProcessHandle.current().pid();
        RedisClusterClient plain = RedisClusterClient.create(RedisURI.create("127.0.0.1", cluster.port(0)));
        try (StatefulRedisClusterConnection<String, byte[]> connection = plain.connect(RedisCodec.of(StringCodec.UTF8,
                ByteArrayCodec.INSTANCE))) {
            double l1StoreS;
            double writeThroughS;
            double prefetchS;
            double foreign;
            // the write-through backlog may hold a quarter of the pool: room for the whole prompt
            try (ServerProcess a = ServerProcess.start("--l1-size-gb", Double.toString(Math.max(1, 4.5 * chunks * objectBytes / (1L << 30))),
                    "--l2-adapter", adapter); JavaWorker worker = new JavaWorker(a.endpoint(), 1, MODEL, geometry)) {
                awaitPool(a);
                awaitConnected(a);
                Machine.CpuSample cpuBefore = Machine.CpuSample.take(a.pid(), self);
                worker.register();
                worker.fill(blocks, 7);
                check(worker.store(warmUp, 0, warmUp.length, JavaWorker.range(0, warmUp.length / 16), "warm-up"), "warm-up STORE");
                awaitKeys(connection, cluster, WARM_UP_CHUNKS);
                long t0 = System.nanoTime();
                check(worker.store(tokens, 0, chunks * CHUNK, blocks, "write"), "STORE");
                long t1 = System.nanoTime();
                // a key appears when its whole value has arrived: a completion signal that takes none of the server's CPU
                awaitKeys(connection, cluster, WARM_UP_CHUNKS + chunks);
                l1StoreS = (t1 - t0) / 1e9;
                writeThroughS = (System.nanoTime() - t1) / 1e9;
                check(Http.metric(a, "lmcache_mp_l2_store_failed_requests_total") == 0, "no write-through failed");
                foreign = Machine.CpuSample.take(a.pid(), self).foreignCoresSince(cpuBefore);
            }
            try (ServerProcess b = ServerProcess.start("--l1-size-gb", Double.toString(Math.max(1, 1.5 * chunks * objectBytes / (1L << 30))),
                    "--l2-adapter", adapter); JavaWorker worker = new JavaWorker(b.endpoint(), 2, MODEL, geometry)) {
                awaitPool(b);
                awaitConnected(b);
                Machine.CpuSample cpuBefore = Machine.CpuSample.take(b.pid(), self);
                worker.register();
                check(lookup(worker, warmUp, "warm-up") == WARM_UP_CHUNKS, "the warm-up prompt hits the cluster");
                worker.endSession("warm-up");
                long t0 = System.nanoTime();
                int hits = lookup(worker, tokens, "prefetch");
                prefetchS = (System.nanoTime() - t0) / 1e9;
                check(hits == chunks, "all " + chunks + " chunks loaded from the cluster, got " + hits);
                int[] target = JavaWorker.range(0, CHUNK / 16);
                worker.zero(target);
                check(worker.retrieve(tokens, 0, CHUNK, target, 0, "prefetch"), "RETRIEVE of chunk 0");
                foreign = Math.max(foreign, Machine.CpuSample.take(b.pid(), self).foreignCoresSince(cpuBefore));
            }
            double[] plainS = plainLoop(connection, chunks, (int) objectBytes);
            String benchmark = redisBenchmark(cluster, objectBytes);
            write(results, new Machine.Run(command, machine, loadBefore, foreign), chunks, objectBytes, new Figures(l1StoreS, writeThroughS,
                    prefetchS, plainS[0], plainS[1], foreign), benchmark);
        } finally {
            plain.shutdown();
        }
    }

    /** The same number of objects of the same size, SET then GET with plain Lettuce (byte[] values, all sent before any is awaited). */
    private static double[] plainLoop(StatefulRedisClusterConnection<String, byte[]> connection, int chunks, int objectBytes)
            throws Exception {
        List<byte[]> values = new ArrayList<>();
        for (int i = 0; i < chunks; i++) {
            byte[] value = new byte[objectBytes];
            ThreadLocalRandom.current().nextBytes(value);
            values.add(value);
        }
        connection.sync().set("plain-warm-up", values.getFirst());
        connection.sync().get("plain-warm-up");
        long t0 = System.nanoTime();
        List<RedisFuture<String>> sets = new ArrayList<>();
        for (int i = 0; i < chunks; i++) {
            sets.add(connection.async().set("plain-" + i, values.get(i)));
        }
        for (RedisFuture<String> set : sets) {
            check("OK".equals(set.get(120, TimeUnit.SECONDS)), "plain SET");
        }
        long t1 = System.nanoTime();
        List<RedisFuture<byte[]>> gets = new ArrayList<>();
        for (int i = 0; i < chunks; i++) {
            gets.add(connection.async().get("plain-" + i));
        }
        List<byte[]> got = new ArrayList<>();
        for (RedisFuture<byte[]> get : gets) {
            got.add(get.get(120, TimeUnit.SECONDS));
        }
        long t2 = System.nanoTime();
        for (int i = 0; i < chunks; i++) {
            check(Arrays.equals(values.get(i), got.get(i)), "plain GET returns the bytes");
        }
        return new double[] {(t1 - t0) / 1e9, (t2 - t1) / 1e9};
    }

    /** redis-benchmark --cluster, SET and GET of values of the object size: its requests per second, as it prints them. */
    private static String redisBenchmark(RedisNodes cluster, long objectBytes) throws Exception {
        Process process = new ProcessBuilder("redis-benchmark", "-h", "127.0.0.1", "-p", Integer.toString(cluster.port(0)), "--cluster",
                "-t", "set,get", "-d", Long.toString(objectBytes), "-n", "16", "-c", "2", "-q").redirectErrorStream(true).start();
        String out = new String(process.getInputStream().readAllBytes());
        check(process.waitFor(120, TimeUnit.SECONDS) && process.exitValue() == 0, "redis-benchmark ran: " + out);
        StringBuilder figures = new StringBuilder();
        for (String part : out.split("[\r\n]")) {
            String line = part.strip();
            if (line.matches("^(SET|GET): [0-9.]+ requests per second.*")) {
                String op = line.substring(0, 3);
                double rps = Double.parseDouble(line.substring(5, line.indexOf(" requests")));
                figures.append(String.format(Locale.ROOT, "| redis-benchmark %s (`-d %d -n 16 -c 2 --cluster`) | %.2f GB/s (%.2f requests/s) |%n",
                        op, objectBytes, rps * objectBytes / 1e9, rps));
            }
        }
        return figures.toString();
    }

    private static void awaitKeys(StatefulRedisClusterConnection<String, byte[]> connection, RedisNodes cluster, long keys) {
        long deadlineNs = System.nanoTime() + WAIT_NS;
        while (true) {
            long count = 0;
            for (int node = 0; node < cluster.size(); node++) {
                count += connection.getConnection("127.0.0.1", cluster.port(node)).sync().dbsize();
            }
            if (count >= keys) {
                return;
            }
            check(deadlineNs - System.nanoTime() > 0, keys + " keys written within 120 s, got " + count);
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
        }
    }

    /** LOOKUP as the scheduler sends it, then QUERY_PREFETCH_STATUS until it answers a count. */
    private static int lookup(JavaWorker worker, int[] tokens, String requestId) {
        TestClient client = worker.client();
        client.call(8, worker.key(tokens, 0, tokens.length, requestId, null, 1, 1), pack(p -> p.packInt(1)));
        long deadlineNs = System.nanoTime() + WAIT_NS;
        while (true) {
            TestClient.Reply reply = client.call(9, pack(p -> p.packString(requestId)));
            if (reply.payload() != null) {
                return Integer.parseInt(reply.payloadHex(), 16);
            }
            check(deadlineNs - System.nanoTime() > 0, "the prefetch answered within 120 s");
            LockSupport.parkNanos(POLL_NS);
        }
    }

    /** Until the pool is prefaulted: the preparation thread would take a core from the measurement (the pool is allocatable earlier). */
    private static void awaitPool(ServerProcess server) throws InterruptedException {
        long deadlineNs = System.nanoTime() + WAIT_NS;
        while (!server.log().contains("L1 pool preparation: 100%")) {
            check(deadlineNs - System.nanoTime() > 0, "the L1 pool is prefaulted within 120 s");
            Thread.sleep(50);
        }
    }

    /** The adapter connects in the background (the server is ready before): until its status says connected and healthy. */
    private static void awaitConnected(ServerProcess server) throws InterruptedException {
        Pattern connected = Pattern.compile("\"connected\"\\s*:\\s*true");
        Pattern healthy = Pattern.compile("\"is_healthy\"\\s*:\\s*true");
        long deadlineNs = System.nanoTime() + WAIT_NS;
        while (true) {
            String status = Http.get(server.httpBase() + "/status").body();
            if (connected.matcher(status).find() && healthy.matcher(status).find()) {
                return;
            }
            check(deadlineNs - System.nanoTime() > 0, "the valkey adapter is connected within 120 s");
            Thread.sleep(50);
        }
    }

    private static void write(Path results, Machine.Run run, int chunks, long objectBytes, Figures f, String benchmark) {
        long total = chunks * objectBytes;
        StringBuilder md = new StringBuilder();
        Machine.sectionHead(md, "L2: the valkey adapter on a local 3-master Redis cluster", run);
        md.append(String.format(Locale.ROOT, "%d chunk objects of %d MiB (32 layers of FlashAttention NHD `[2, nb, 16, 8, 128]` bf16, %d MiB in"
                + " all), one CPU worker, `--l2-adapter '{\"type\":\"valkey\",\"startup_nodes\":...,\"cluster_mode\":true}'` (8 values in"
                + " flight) against three redis-server masters (%s) on loopback, no persistence. Write-through: server A, from the STORE's"
                + " reply (its own copy into L1 took %.3f s) until the cluster held every key (a key appears when its whole value has"
                + " arrived). Load: server B (its own empty L1) from the LOOKUP until QUERY_PREFETCH_STATUS answered %d, i.e. hashing,"
                + " EXISTS per key, L1 reservations and GETs. Plain Lettuce: the same number of values of the same size, in this JVM, all"
                + " SETs sent then awaited, then all GETs (byte[] values, one cluster connection), in the same run after both servers"
                + " stopped. Each server and Redis share this machine's cores with the client.%n%n",
                chunks, objectBytes >> 20, total >> 20, redisVersion(), f.l1StoreS(), chunks));
        md.append("| figure | valkey adapter (through the server) | plain Lettuce loop | adapter / plain |\n|---|---:|---:|---:|\n");
        md.append(String.format(Locale.ROOT, "| write (SET), GB/s | %s | %s | %.2f |%n", gbs(total, f.writeThroughS()), gbs(total, f.plainSetS()),
                f.plainSetS() / f.writeThroughS()));
        md.append(String.format(Locale.ROOT, "| load (GET), GB/s | %s | %s | %.2f |%n%n", gbs(total, f.prefetchS()), gbs(total, f.plainGetS()),
                f.plainGetS() / f.prefetchS()));
        md.append(ResultsFile.DETAILS).append("\n\n");
        md.append("For reference, the cluster's own client benchmark on the same machine, right after:\n\n| redis-benchmark | rate |\n|---|---:|\n");
        md.append(benchmark);
        ResultsFile.writeSection(results, "redis", md.toString());
        System.out.println(md);
    }

    private static String redisVersion() {
        try {
            Process process = new ProcessBuilder("redis-server", "--version").redirectErrorStream(true).start();
            String out = new String(process.getInputStream().readAllBytes()).strip();
            process.waitFor(10, TimeUnit.SECONDS);
            int v = out.indexOf("v=");
            return v < 0 ? out : "Redis " + out.substring(v + 2, out.indexOf(' ', v));
        } catch (Exception e) {
            return "redis-server";
        }
    }
}
