package io.lmcache.server.l2.testing;

import io.lettuce.core.cluster.SlotHash;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * Real redis-server processes on loopback ports for tests and benchmarks: one standalone node, or a
 * cluster of masters ({@code --cluster-enabled yes}, then {@code redis-cli --cluster create}). Nodes
 * keep nothing on disk but their cluster config, so a killed node restarts empty, with its slots.
 * {@code cluster-require-full-coverage no}: the other masters keep serving their slots while one is
 * down. Every process is stopped by its own PID (close, or a JVM exit hook if a test dies first).
 */
public final class RedisNodes implements AutoCloseable {
    private static final String SERVER = "redis-server";
    private static final long START_TIMEOUT_MS = 15_000;

    /** How many times {@link #startAll} starts a node again on another port when its port was taken meanwhile. */
    private static final int BIND_RETRIES = 3;
    /** Every port {@link #freePort} has returned in this JVM (a few per test class). */
    private static final Set<Integer> ISSUED_PORTS = ConcurrentHashMap.newKeySet();

    private final Path dir;
    private final boolean cluster;
    private final List<String> extraArgs;
    private final int[] ports;
    private final Process[] processes;
    /** Slot ranges per node (cluster), from CLUSTER NODES: {@code ranges[node]} holds [from, to] pairs. */
    private final List<List<int[]>> ranges = new ArrayList<>();

    private RedisNodes(Path dir, boolean cluster, int count, List<String> extraArgs) {
        this.dir = dir;
        this.cluster = cluster;
        this.extraArgs = List.copyOf(extraArgs);
        this.ports = new int[count];
        this.processes = new Process[count];
    }

    /** One standalone node; {@code extraArgs} go to redis-server (e.g. {@code --requirepass x}). */
    public static RedisNodes standalone(String... extraArgs) {
        RedisNodes nodes = new RedisNodes(tempDir(), false, 1, List.of(extraArgs));
        nodes.ports[0] = freePort();
        nodes.startAll();
        return nodes;
    }

    /** A standalone node on a port chosen now but started later ({@link #start(int)}): a node that is not up yet. */
    public static RedisNodes standaloneNotStarted() {
        RedisNodes nodes = new RedisNodes(tempDir(), false, 1, List.of());
        nodes.ports[0] = freePort();
        return nodes;
    }

    /** {@code masters} masters, no replicas, every slot assigned, cluster state ok on every node. */
    public static RedisNodes cluster(int masters) {
        RedisNodes nodes = new RedisNodes(tempDir(), true, masters, List.of());
        for (int i = 0; i < masters; i++) {
            nodes.ports[i] = freePort();
        }
        nodes.startAll();
        List<String> create = new ArrayList<>(List.of("redis-cli", "--cluster", "create"));
        for (int port : nodes.ports) {
            create.add("127.0.0.1:" + port);
        }
        create.addAll(List.of("--cluster-replicas", "0", "--cluster-yes"));
        nodes.run(create);
        for (int i = 0; i < masters; i++) {
            nodes.awaitClusterOk(i);
        }
        nodes.readSlots();
        return nodes;
    }

    /**
     * Starts every node on its new port. A port found free when chosen can be taken before its node binds it (another test's
     * outgoing connection landed on a cluster bus port, port + 10000, once in CI): such a node is started again on another
     * port, at most {@link #BIND_RETRIES} times. Only here, before any node's port is known to a client or a cluster.
     */
    private void startAll() {
        for (int i = 0; i < ports.length; i++) {
            for (int attempt = 0; ; attempt++) {
                try {
                    start(i);
                    break;
                } catch (IllegalStateException e) {
                    if (attempt >= BIND_RETRIES || !String.valueOf(e.getMessage()).contains("Address already in use")) {
                        throw e;
                    }
                    processes[i].destroyForcibly();
                    ports[i] = freePort();
                }
            }
        }
    }

    /** Starts node {@code i} (again, after {@link #kill}: same port and cluster config) and waits until it answers PING. */
    public void start(int i) {
        Path nodeDir = dir.resolve("node-" + ports[i]);
        List<String> command = new ArrayList<>(List.of(SERVER, "--port", Integer.toString(ports[i]), "--bind", "127.0.0.1",
                "--daemonize", "no", "--save", "", "--appendonly", "no", "--dir", nodeDir.toString(), "--logfile", nodeDir.resolve("log")
                .toString()));
        if (cluster) {
            command.addAll(List.of("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
                    "--cluster-require-full-coverage", "no"));
        }
        command.addAll(extraArgs);
        try {
            Files.createDirectories(nodeDir);
            processes[i] = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(nodeDir.resolve("stdout").toFile()).start();
        } catch (IOException e) {
            throw new IllegalStateException("cannot start redis-server (install it: apt-get install redis-server): " + e.getMessage(), e);
        }
        Process started = processes[i];
        Runtime.getRuntime().addShutdownHook(new Thread(started::destroyForcibly));
        long deadlineMs = System.currentTimeMillis() + START_TIMEOUT_MS;
        while (!cli(i, "PING").contains("PONG") && !cli(i, "PING").contains("NOAUTH")) {
            if (!started.isAlive() || System.currentTimeMillis() > deadlineMs) {
                throw new IllegalStateException("redis-server on port " + ports[i] + " did not start: " + log(i));
            }
            sleep(20);
        }
        if (cluster && !ranges.isEmpty()) {
            awaitClusterOk(i);
        }
    }

    /** SIGKILL, as a crash: the node's connections drop at once. */
    public void kill(int i) {
        Process process = processes[i];
        process.destroyForcibly();
        try {
            process.waitFor(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** SIGSTOP: the node keeps its connections but answers nothing (a hung or failing-over node) until {@link #resume}. */
    public void pause(int i) {
        signal(i, "STOP");
    }

    public void resume(int i) {
        signal(i, "CONT");
    }

    private void signal(int i, String signal) {
        run(List.of("kill", "-" + signal, Long.toString(processes[i].pid())));
    }

    public int port(int i) {
        return ports[i];
    }

    public int size() {
        return ports.length;
    }

    /** {@code 127.0.0.1:p1,127.0.0.1:p2,...}: the valkey adapter's startup_nodes. */
    public String startupNodes() {
        return Arrays.stream(ports).mapToObj(port -> "127.0.0.1:" + port).collect(Collectors.joining(","));
    }

    /** The node that holds {@code key}'s slot (cluster). */
    public int nodeOf(String key) {
        int slot = SlotHash.getSlot(key);
        for (int node = 0; node < ranges.size(); node++) {
            for (int[] range : ranges.get(node)) {
                if (slot >= range[0] && slot <= range[1]) {
                    return node;
                }
            }
        }
        throw new IllegalStateException("slot " + slot + " is not assigned");
    }

    /** redis-cli against node {@code i}: its output, or "" when it failed. */
    public String cli(int i, String... args) {
        List<String> command = new ArrayList<>(List.of("redis-cli", "-p", Integer.toString(ports[i])));
        command.addAll(List.of(args));
        try {
            return run(command);
        } catch (IllegalStateException e) {
            return "";
        }
    }

    /** Keys held by node {@code i} (DBSIZE). */
    public long keyCount(int i) {
        return Long.parseLong(cli(i, "DBSIZE").strip());
    }

    public String log(int i) {
        try {
            return Files.readString(dir.resolve("node-" + ports[i]).resolve("log"));
        } catch (IOException e) {
            return "<no log: " + e + ">";
        }
    }

    private void awaitClusterOk(int i) {
        long deadlineMs = System.currentTimeMillis() + START_TIMEOUT_MS;
        while (!cli(i, "CLUSTER", "INFO").contains("cluster_state:ok")) {
            if (System.currentTimeMillis() > deadlineMs) {
                throw new IllegalStateException("cluster state on port " + ports[i] + " not ok: " + cli(i, "CLUSTER", "INFO"));
            }
            sleep(50);
        }
    }

    private void readSlots() {
        String nodes = cli(0, "CLUSTER", "NODES");
        for (int port : ports) {
            List<int[]> own = new ArrayList<>();
            for (String line : nodes.split("\n")) {
                String[] fields = line.strip().split(" ");
                if (fields.length > 8 && fields[1].startsWith("127.0.0.1:" + port + "@")) {
                    for (int f = 8; f < fields.length; f++) {
                        String[] bounds = fields[f].split("-");
                        own.add(new int[] {Integer.parseInt(bounds[0]), Integer.parseInt(bounds[bounds.length - 1])});
                    }
                }
            }
            ranges.add(own);
        }
    }

    private String run(List<String> command) {
        try {
            Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
            String out = new String(process.getInputStream().readAllBytes());
            if (!process.waitFor(30, TimeUnit.SECONDS) || process.exitValue() != 0) {
                process.destroyForcibly();
                throw new IllegalStateException(String.join(" ", command) + " failed: " + out);
            }
            return out;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    @Override
    public void close() {
        for (Process process : processes) {
            if (process != null) {
                process.destroy();
            }
        }
        for (Process process : processes) {
            if (process != null) {
                try {
                    if (!process.waitFor(5, TimeUnit.SECONDS)) {
                        process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }
        try (Stream<Path> walk = Files.walk(dir)) {
            for (Path path : walk.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(path);
            }
        } catch (IOException e) {
            // a temp dir left behind is harmless
        }
    }

    private static Path tempDir() {
        try {
            return Files.createTempDirectory("lmcache-redis-");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * A free loopback port whose cluster bus port (+10000) is free too, and one this JVM has not handed out before: the probe
     * socket is closed before the node binds, so the kernel may offer the same port to the next call (CI once got a
     * three-master cluster whose nodes 2 and 3 shared a port: two masters, the second node's PING answered by the first).
     */
    private static int freePort() {
        for (int attempt = 0; attempt < 100; attempt++) {
            try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                int port = socket.getLocalPort();
                if (port < 55000 && ISSUED_PORTS.add(port)) {
                    try (ServerSocket bus = new ServerSocket(port + 10000, 1, InetAddress.getLoopbackAddress())) {
                        return bus.getLocalPort() - 10000;
                    }
                }
            } catch (IOException e) {
                // taken: try another
            }
        }
        throw new IllegalStateException("no free port pair");
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
