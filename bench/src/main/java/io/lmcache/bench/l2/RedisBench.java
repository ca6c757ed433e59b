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
import io.lmcache.bench.Medians;
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
import java.util.function.ToDoubleFunction;
import java.util.regex.Pattern;

/**
 * The valkey adapter on a local 3-master Redis cluster (bench/RESULTS.md#l2-tiers): write-through
 * and load rates of 32 MiB chunk objects through the server, next to a plain Lettuce SET/GET loop of
 * the same number of objects of the same size, in rounds that alternate which goes first, and
 * redis-benchmark's own figure.
 *
 * <p>{@code bench/run-redis.sh [--chunks 16] [--rounds 5] [--completion notify|dbsize] [--results bench/RESULTS.md]}
 */
public final class RedisBench {
    private static final int CHUNK = 256;
    /** 32 layers of FlashAttention NHD [2, nb, 16, 8, 128] bf16: 32 KiB pieces, 32 MiB chunk objects (a Llama-8B layout). */
    private static final int LAYERS = 32;
    private static final String MODEL = "bench/redis-model";
    private static final int WARM_UP_CHUNKS = 2;
    /**
     * QUERY_PREFETCH_STATUS every millisecond while a load runs: polled every 100 µs, the bench's requests took CPU from the
     * load it timed on 2 cores (vLLM's scheduler asks once a step, tens of milliseconds).
     */
    private static final long POLL_NS = 1_000_000;
    /** Before each timed turn: the previous turn's after-work (Redis freeing, the servers' GC) ends first, whoever goes next. */
    private static final long SETTLE_MS = 1_000;
    private static final long WAIT_NS = TimeUnit.SECONDS.toNanos(120);

    private RedisBench() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            options.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        int chunks = Integer.parseInt(options.getOrDefault("chunks", "16"));
        int rounds = Integer.parseInt(options.getOrDefault("rounds", "6")); // even: each order goes first as often
        // dbsize: the earlier completion signal, DBSIZE of every node each millisecond (for comparison with the notifications)
        boolean polled = options.getOrDefault("completion", "notify").equals("dbsize");
        Path results = Path.of(options.getOrDefault("results", "bench/RESULTS.md"));
        String loadBefore = Machine.loadAverages();
        String machine = Machine.describe();
        try (RedisNodes cluster = RedisNodes.cluster(3)) {
            for (int node = 0; node < cluster.size(); node++) {
                // the tests' 2 s node timeout would take a node that a loaded VM starves while it reads a value for failed (CLUSTERDOWN)
                check(cluster.cli(node, "CONFIG", "SET", "cluster-node-timeout", "60000").strip().equals("OK"), "node timeout raised");
            }
            run(cluster, chunks, rounds, polled, results, new Invocation(("bench/run-redis.sh " + String.join(" ", args)).trim(), machine, loadBefore));
        }
    }

    /** One round, in seconds: the adapter's write-through and load through the servers, the plain loop's SETs and GETs. */
    private record Round(double writeThroughS, double prefetchS, double plainSetS, double plainGetS, boolean adapterFirst) {
        double writeRatio() {
            return plainSetS / writeThroughS;
        }

        double loadRatio() {
            return plainGetS / prefetchS;
        }
    }

    /** What one run measured. */
    private record Figures(double l1StoreS, List<Round> rounds, boolean polled, double foreignCores) {}

    /** The two servers of a run and their workers: A writes through, B (its own empty L1) loads. */
    private record Servers(RedisNodes cluster, ServerProcess a, JavaWorker writer, ServerProcess b, JavaWorker reader) {}

    /** The command line, the machine and its load averages before the run: the report's header. */
    private record Invocation(String command, String machine, String loadBefore) {}

    private static void run(RedisNodes cluster, int chunks, int rounds, boolean polled, Path results, Invocation invocation) throws Exception {
        JavaWorker.Geometry geometry = new JavaWorker.Geometry(LAYERS, (chunks + WARM_UP_CHUNKS) * CHUNK / 16 + 16, 16, 8, 128);
        long objectBytes = geometry.chunkObjectBytes(CHUNK);
        String adapter = "{\"type\":\"valkey\",\"startup_nodes\":\"" + cluster.startupNodes() + "\",\"cluster_mode\":true,\"request_timeout\":60}";
        long self = ProcessHandle.current().pid();
        RedisClusterClient plain = RedisClusterClient.create(RedisURI.create("127.0.0.1", cluster.port(0)));
        try (StatefulRedisClusterConnection<String, byte[]> connection = plain.connect(RedisCodec.of(StringCodec.UTF8,
                ByteArrayCodec.INSTANCE)); KeyWatch sets = KeyWatch.start(cluster, "plain-");
                // A: room for two prompts and the write-through backlog (a quarter of the pool); LRU makes room for the next round
                ServerProcess a = ServerProcess.start("--l1-size-gb", Double.toString(Math.max(1, 4.5 * chunks * objectBytes / (1L << 30))),
                        "--l2-adapter", adapter);
                JavaWorker writer = new JavaWorker(a.endpoint(), 1, MODEL, geometry);
                ServerProcess b = ServerProcess.start("--l1-size-gb", Double.toString(Math.max(1, 2.5 * chunks * objectBytes / (1L << 30))),
                        "--l2-adapter", adapter, "--l2-prefetch-load-timeout", "120");
                JavaWorker reader = new JavaWorker(b.endpoint(), 2, MODEL, geometry)) {
            Servers servers = new Servers(cluster, a, writer, b, reader);
            for (ServerProcess server : List.of(a, b)) {
                awaitPool(server);
                awaitConnected(server);
            }
            Machine.CpuSample cpuA = Machine.CpuSample.take(a.pid(), self);
            Machine.CpuSample cpuB = Machine.CpuSample.take(b.pid(), self);
            writer.register();
            writer.fill(JavaWorker.range(0, chunks * CHUNK / 16), 7);
            reader.register();
            double l1StoreS = warmUp(servers, connection, sets, chunks, (int) objectBytes);
            List<byte[]> values = randomValues(chunks, (int) objectBytes);
            List<Round> measured = new ArrayList<>();
            for (int round = 0; round < rounds; round++) {
                measured.add(round(servers, connection, sets, values, round, chunks, polled));
                flush(connection, cluster);
            }
            check(Http.metric(a, "lmcache_mp_l2_store_failed_requests_total") == 0, "no write-through failed");
            double foreign = Math.max(Machine.CpuSample.take(a.pid(), self).foreignCoresSince(cpuA),
                    Machine.CpuSample.take(b.pid(), self).foreignCoresSince(cpuB));
            String benchmark = redisBenchmark(cluster, objectBytes);
            Machine.Run run = new Machine.Run(invocation.command(), invocation.machine(), invocation.loadBefore(), foreign);
            write(results, run, chunks, objectBytes, new Figures(l1StoreS, measured, polled, foreign), benchmark);
        } finally {
            plain.shutdown();
        }
    }

    /** Connections, JIT and the first slab of each pool: one small prompt through both servers and a plain SET/GET; the L1 copy's time. */
    private static double warmUp(Servers s, StatefulRedisClusterConnection<String, byte[]> connection, KeyWatch sets, int chunks,
            int objectBytes) {
        int[] warmUp = JavaWorker.tokens(51, WARM_UP_CHUNKS * CHUNK);
        long before = sets.count();
        check(s.writer().store(warmUp, 0, warmUp.length, JavaWorker.range(0, warmUp.length / 16), "warm-up"), "warm-up STORE");
        sets.await(before + WARM_UP_CHUNKS, WAIT_NS);
        check(lookup(s.reader(), warmUp, "warm-up") == WARM_UP_CHUNKS, "the warm-up prompt hits the cluster");
        s.reader().endSession("warm-up");
        byte[] value = new byte[objectBytes];
        connection.sync().set("plain-warm-up", value);
        connection.sync().get("plain-warm-up");
        // the L1 copy of a whole prompt, for the record (its objects go to L2 too: awaited before the rounds start)
        int[] tokens = JavaWorker.tokens(50, chunks * CHUNK);
        before = sets.count();
        long t0 = System.nanoTime();
        check(s.writer().store(tokens, 0, chunks * CHUNK, JavaWorker.range(0, chunks * CHUNK / 16), "l1-copy"), "STORE");
        double l1StoreS = (System.nanoTime() - t0) / 1e9;
        sets.await(before + chunks, WAIT_NS);
        return l1StoreS;
    }

    /**
     * One round, the adapter and the plain loop alternating which goes first: the write-through of a fresh prompt (from the STORE's
     * reply until Redis announced a SET of every key) against the plain SETs, then its load by B against the plain GETs.
     */
    private static Round round(Servers s, StatefulRedisClusterConnection<String, byte[]> connection, KeyWatch sets, List<byte[]> values,
            int round, int chunks, boolean polled) throws Exception {
        boolean adapterFirst = round % 2 == 0;
        int[] tokens = JavaWorker.tokens(52 + round, chunks * CHUNK);
        int[] blocks = JavaWorker.range(0, chunks * CHUNK / 16);
        double writeS = 0;
        double setS = 0;
        for (int turn = 0; turn < 2; turn++) {
            Thread.sleep(SETTLE_MS);
            if ((turn == 0) == adapterFirst) {
                long before = polled ? keys(connection, s.cluster()) : sets.count();
                check(s.writer().store(tokens, 0, chunks * CHUNK, blocks, "write-" + round), "STORE");
                long t1 = System.nanoTime();
                if (polled) {
                    awaitKeys(connection, s.cluster(), before + chunks);
                } else {
                    sets.await(before + chunks, WAIT_NS);
                }
                writeS = (System.nanoTime() - t1) / 1e9;
            } else {
                setS = plainSets(connection, values, round);
            }
        }
        double loadS = 0;
        double getS = 0;
        for (int turn = 0; turn < 2; turn++) {
            Thread.sleep(SETTLE_MS);
            if ((turn == 0) == adapterFirst) {
                String session = "prefetch-" + round;
                long t0 = System.nanoTime();
                int hits = lookup(s.reader(), tokens, session);
                loadS = (System.nanoTime() - t0) / 1e9;
                check(hits == chunks, "all " + chunks + " chunks loaded from the cluster, got " + hits);
                int[] target = JavaWorker.range(0, CHUNK / 16);
                s.reader().zero(target);
                check(s.reader().retrieve(tokens, 0, CHUNK, target, 0, session), "RETRIEVE of chunk 0");
                s.reader().endSession(session);
            } else {
                getS = plainGets(connection, values, round);
            }
        }
        Round r = new Round(writeS, loadS, setS, getS, adapterFirst);
        System.out.printf(Locale.ROOT, "round %d (%s first): write %.3f s, plain SET %.3f s (%.2f); load %.3f s, plain GET %.3f s (%.2f)%n",
                round, adapterFirst ? "adapter" : "plain", writeS, setS, r.writeRatio(), loadS, getS, r.loadRatio());
        return r;
    }

    private static List<byte[]> randomValues(int chunks, int objectBytes) {
        List<byte[]> values = new ArrayList<>();
        for (int i = 0; i < chunks; i++) {
            byte[] value = new byte[objectBytes];
            ThreadLocalRandom.current().nextBytes(value);
            values.add(value);
        }
        return values;
    }

    /** The same number of values of the same size, plain Lettuce SETs (byte[] values, all sent before any is awaited). */
    private static double plainSets(StatefulRedisClusterConnection<String, byte[]> connection, List<byte[]> values, int round)
            throws Exception {
        long t0 = System.nanoTime();
        List<RedisFuture<String>> sets = new ArrayList<>();
        for (int i = 0; i < values.size(); i++) {
            sets.add(connection.async().set("plain-" + round + "-" + i, values.get(i)));
        }
        for (RedisFuture<String> set : sets) {
            check("OK".equals(set.get(120, TimeUnit.SECONDS)), "plain SET");
        }
        return (System.nanoTime() - t0) / 1e9;
    }

    /** Plain Lettuce GETs of those values (all sent before any is awaited), checked after the clock stopped. */
    private static double plainGets(StatefulRedisClusterConnection<String, byte[]> connection, List<byte[]> values, int round)
            throws Exception {
        long t0 = System.nanoTime();
        List<RedisFuture<byte[]>> gets = new ArrayList<>();
        for (int i = 0; i < values.size(); i++) {
            gets.add(connection.async().get("plain-" + round + "-" + i));
        }
        List<byte[]> got = new ArrayList<>();
        for (RedisFuture<byte[]> get : gets) {
            got.add(get.get(120, TimeUnit.SECONDS));
        }
        double s = (System.nanoTime() - t0) / 1e9;
        for (int i = 0; i < values.size(); i++) {
            check(Arrays.equals(values.get(i), got.get(i)), "plain GET returns the bytes");
        }
        return s;
    }

    /** Every node emptied between rounds (outside the clock), so Redis holds one round's values at a time. */
    private static void flush(StatefulRedisClusterConnection<String, byte[]> connection, RedisNodes cluster) {
        for (int node = 0; node < cluster.size(); node++) {
            connection.getConnection("127.0.0.1", cluster.port(node)).sync().flushall();
        }
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

    private static long keys(StatefulRedisClusterConnection<String, byte[]> connection, RedisNodes cluster) {
        long count = 0;
        for (int node = 0; node < cluster.size(); node++) {
            count += connection.getConnection("127.0.0.1", cluster.port(node)).sync().dbsize();
        }
        return count;
    }

    /** Until the nodes hold {@code keys} keys, asking each node's DBSIZE every millisecond (the {@code --completion dbsize} signal). */
    private static void awaitKeys(StatefulRedisClusterConnection<String, byte[]> connection, RedisNodes cluster, long keys) {
        long deadlineNs = System.nanoTime() + WAIT_NS;
        while (true) {
            long count = keys(connection, cluster);
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
        List<Round> rounds = f.rounds();
        StringBuilder md = new StringBuilder();
        Machine.sectionHead(md, "L2: the valkey adapter on a local 3-master Redis cluster", run);
        md.append(String.format(Locale.ROOT, "%d chunk objects of %d MiB (32 layers of FlashAttention NHD `[2, nb, 16, 8, 128]` bf16, %d MiB in"
                + " all) a round, %d rounds, one CPU worker, `--l2-adapter '{\"type\":\"valkey\",\"startup_nodes\":...,\"cluster_mode\":true,"
                + "\"request_timeout\":60}'` (8 values in flight; B with `--l2-prefetch-load-timeout 120`: a loaded VM slows a round instead of"
                + " failing it) against three redis-server masters (%s) on loopback, no persistence, `cluster-node-timeout` 60 s, every node"
                + " flushed between rounds. Write-through: server A, from the STORE's reply (a prompt's copy into L1 took %.3f s) until %s."
                + " Load: server B (its own L1,"
                + " without the prompt) from the LOOKUP until QUERY_PREFETCH_STATUS (asked every millisecond) answered %d, i.e. hashing, EXISTS per key, L1"
                + " reservations and GETs. Plain Lettuce: the same number of values of the same size, in the bench's JVM, all SETs sent then"
                + " awaited, then all GETs (byte[] values, one cluster connection). Each round alternates which goes first, the adapter or"
                + " the plain loop, both servers running throughout, a 1 s pause before each timed turn; each server and Redis share this"
                + " machine's cores with the client.%n%n",
                chunks, objectBytes >> 20, total >> 20, rounds.size(), redisVersion(), f.l1StoreS(), f.polled() ? "the nodes' DBSIZE, asked every"
                + " millisecond, counted every key (`--completion dbsize`)" : "Redis announced a SET of every key (keyspace notifications, no"
                + " command sent while the values arrive; a key is set when its whole value has arrived)", chunks));
        md.append("| figure, median of the rounds | valkey adapter (through the server) | plain Lettuce loop | adapter / plain, median (min–max)"
                + " |\n|---|---:|---:|---:|\n");
        md.append(String.format(Locale.ROOT, "| write (SET), GB/s | %s | %s | %.2f (%.2f–%.2f) |%n", gbs(total, Medians.of(rounds,
                Round::writeThroughS)), gbs(total, Medians.of(rounds, Round::plainSetS)), Medians.of(rounds, Round::writeRatio),
                min(rounds, Round::writeRatio), max(rounds, Round::writeRatio)));
        md.append(String.format(Locale.ROOT, "| load (GET), GB/s | %s | %s | %.2f (%.2f–%.2f) |%n%n", gbs(total, Medians.of(rounds,
                Round::prefetchS)), gbs(total, Medians.of(rounds, Round::plainGetS)), Medians.of(rounds, Round::loadRatio),
                min(rounds, Round::loadRatio), max(rounds, Round::loadRatio)));
        md.append(ResultsFile.DETAILS).append("\n\n");
        md.append("Every round, GB/s:\n\n| round | first | adapter write | plain SET | write ratio | adapter load | plain GET | load ratio |\n"
                + "|---:|---|---:|---:|---:|---:|---:|---:|\n");
        for (int i = 0; i < rounds.size(); i++) {
            Round r = rounds.get(i);
            md.append(String.format(Locale.ROOT, "| %d | %s | %s | %s | %.2f | %s | %s | %.2f |%n", i, r.adapterFirst() ? "adapter" : "plain",
                    gbs(total, r.writeThroughS()), gbs(total, r.plainSetS()), r.writeRatio(), gbs(total, r.prefetchS()), gbs(total,
                            r.plainGetS()), r.loadRatio()));
        }
        md.append("\nFor reference, the cluster's own client benchmark on the same machine, right after:\n\n| redis-benchmark | rate |\n|---|---:|\n");
        md.append(benchmark);
        ResultsFile.writeSection(results, "redis", md.toString());
        System.out.println(md);
    }

    private static double min(List<Round> rounds, ToDoubleFunction<Round> figure) {
        return rounds.stream().mapToDouble(figure).min().orElse(Double.NaN);
    }

    private static double max(List<Round> rounds, ToDoubleFunction<Round> figure) {
        return rounds.stream().mapToDouble(figure).max().orElse(Double.NaN);
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
