package io.lmcache.server.testing;

import static org.awaitility.Awaitility.await;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

/**
 * The real server as a separate process ({@code java -jar server/target/lmcache-server.jar}), on
 * free ports, with its log in a file. Tests start it with shortened timeouts, wait with bounded
 * Awaitility waits and assert on its counters ({@code /metrics}, {@code /status}), not its log's
 * text; {@link ServerExtension} and {@link ServerLogOnFailure} print the log when a test fails.
 */
public final class ServerProcess implements AutoCloseable {
    /**
     * Where the servers' logs go: the build directory, not the system's temporary one. The extensions delete the log of a
     * server whose tests passed and keep (and print) the others'.
     */
    static final Path LOG_DIR = Path.of("target", "server-logs").toAbsolutePath();
    private static final int START_ATTEMPTS = 3;
    private static final List<ServerProcess> LIVE = Collections.synchronizedList(new ArrayList<>());
    private static final List<ServerProcess> STARTED = Collections.synchronizedList(new ArrayList<>());

    private final Process process;
    private final Path log;
    private final int port;
    private final int httpPort;
    /** Set when a test that could have talked to this server failed: its log stays for the post-mortem. */
    private volatile boolean keepLog;

    private ServerProcess(Process process, Path log, int port, int httpPort) {
        this.process = process;
        this.log = log;
        this.port = port;
        this.httpPort = httpPort;
    }

    /** Starts a server with {@code --l1-size-gb 0.25} on free ports unless the args say otherwise, and waits until it is ready. */
    public static ServerProcess start(String... args) {
        return start(Map.of(), args);
    }

    /**
     * As {@link #start(String...)}, with {@code env} added to the environment. A port this class chose that another process
     * took between the choice and the server's bind (the server then exits 2, "cannot bind") is chosen again, a few times;
     * when the start fails for good, the server's log is printed.
     */
    public static ServerProcess start(Map<String, String> env, String... args) {
        for (int attempt = 1; ; attempt++) {
            ServerProcess server = launch(env, args);
            try {
                server.awaitReady();
                return server;
            } catch (RuntimeException | AssertionError e) {
                server.close();
                if (attempt < START_ATTEMPTS && server.lostAPortRace(args)) {
                    server.discardLog();
                    continue;
                }
                server.keepLog();
                ServerExtension.printLog(server);
                throw e;
            }
        }
    }

    /** Whether this server (which chose at least one of its ports itself) exited because one of them was taken. */
    private boolean lostAPortRace(String... args) {
        List<String> given = List.of(args);
        boolean choseAPort = !given.contains("--port") || !given.contains("--http-port");
        return choseAPort && !process.isAlive() && process.exitValue() == 2 && log().contains("cannot bind");
    }

    /** Starts without waiting for readiness (start-up timing and failure tests). */
    public static ServerProcess launch(Map<String, String> env, String... args) {
        return launch(env, Set.of(), args);
    }

    /** As {@link #launch(Map, String...)}, with the variables in {@code unset} taken out of the environment the server inherits. */
    public static ServerProcess launch(Map<String, String> env, Set<String> unset, String... args) {
        List<String> argList = List.of(args);
        int port = argList.contains("--port") ? Integer.parseInt(argList.get(argList.indexOf("--port") + 1)) : freePort();
        int httpPort = argList.contains("--http-port") ? Integer.parseInt(argList.get(argList.indexOf("--http-port") + 1)) : freePort();
        List<String> command = new ArrayList<>(List.of(javaBinary(), "--enable-native-access=ALL-UNNAMED",
                "--sun-misc-unsafe-memory-access=allow", "-XX:+UseZGC", "-Xmx512m", "-jar", serverJar().toString()));
        command.addAll(argList);
        if (!argList.contains("--port")) {
            command.addAll(List.of("--port", Integer.toString(port)));
        }
        if (!argList.contains("--http-port")) {
            command.addAll(List.of("--http-port", Integer.toString(httpPort)));
        }
        if (!argList.contains("--host")) {
            command.addAll(List.of("--host", "127.0.0.1"));
        }
        if (!argList.contains("--http-host")) {
            command.addAll(List.of("--http-host", "127.0.0.1"));
        }
        if (!argList.contains("--l1-size-gb")) {
            command.addAll(List.of("--l1-size-gb", "0.25"));
        }
        try {
            Path log = Files.createTempFile(Files.createDirectories(LOG_DIR), "lmcache-server-", ".log");
            ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile());
            builder.environment().keySet().removeAll(unset);
            builder.environment().putAll(env);
            ServerProcess server = new ServerProcess(builder.start(), log, port, httpPort);
            LIVE.add(server);
            STARTED.add(server);
            return server;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public void awaitReady() {
        await("server ready").atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(50)).until(() -> {
            if (!process.isAlive()) {
                throw new AssertionError("server exited with " + process.exitValue() + " before it was ready:\n" + log());
            }
            return log().contains("ready: ZeroMQ ROUTER");
        });
    }

    public String endpoint() {
        return "tcp://127.0.0.1:" + port;
    }

    public int port() {
        return port;
    }

    public int httpPort() {
        return httpPort;
    }

    public String httpBase() {
        return "http://127.0.0.1:" + httpPort;
    }

    public long pid() {
        return process.pid();
    }

    public Process process() {
        return process;
    }

    public String log() {
        try {
            return Files.readString(log);
        } catch (IOException e) {
            return "<cannot read " + log + ": " + e + ">";
        }
    }

    public Path logFile() {
        return log;
    }

    /** Lines of the log matching {@code regex}. */
    public long countLog(String regex) {
        Pattern pattern = Pattern.compile(regex);
        return log().lines().filter(line -> pattern.matcher(line).find()).count();
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    /** SIGTERM, then waits for the exit; returns the exit code. */
    public int terminate(Duration atMost) throws InterruptedException {
        process.destroy();
        if (!process.waitFor(atMost.toMillis(), TimeUnit.MILLISECONDS)) {
            throw new AssertionError("server did not exit within " + atMost + " of SIGTERM:\n" + log());
        }
        return process.exitValue();
    }

    @Override
    public void close() {
        LIVE.remove(this);
        if (process.isAlive()) {
            process.destroy();
            try {
                if (!process.waitFor(15, TimeUnit.SECONDS)) {
                    process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                process.destroyForcibly();
            }
        }
    }

    /** Keeps the log file whatever happens later (a test that could have talked to this server failed). */
    void keepLog() {
        keepLog = true;
    }

    /** Deletes the log file of a stopped server unless {@link #keepLog} was called; the log text is gone afterwards. */
    void discardLog() {
        if (keepLog || process.isAlive()) {
            return;
        }
        try {
            Files.deleteIfExists(log);
        } catch (IOException e) {
            // a log left in target/ is harmless
        }
    }

    /** Every server started so far, closed or not (for the failure-log extension). */
    static List<ServerProcess> started() {
        synchronized (STARTED) {
            return List.copyOf(STARTED);
        }
    }

    /** Servers started and not yet closed (for the failure-log extension). */
    static List<ServerProcess> live() {
        synchronized (LIVE) {
            return List.copyOf(LIVE);
        }
    }

    /** Ports handed out in this test JVM: the kernel may offer a just-closed ephemeral port again. */
    private static final Set<Integer> HANDED_OUT = ConcurrentHashMap.newKeySet();
    /**
     * Ports are drawn at random below the kernel's ephemeral range (where the ports of outgoing connections and of every
     * {@code bind(0)} come from, so another process is least likely to take one between the choice and the server's bind).
     */
    private static final int LOWEST_PORT = 20_000;
    private static final int EPHEMERAL_LOW = ephemeralLow();

    /**
     * A port free now and never handed out before in this JVM, so that two asked for one server
     * (ZeroMQ and HTTP) or for two servers cannot coincide (it happened: "--http-port: must differ
     * from --port"). Another process may still take it before the server binds it: {@link #start} then chooses again.
     */
    public static int freePort() {
        if (EPHEMERAL_LOW - LOWEST_PORT >= 1_000) {
            for (int attempt = 0; attempt < 200; attempt++) {
                int port = ThreadLocalRandom.current().nextInt(LOWEST_PORT, EPHEMERAL_LOW);
                if (!HANDED_OUT.contains(port) && bindable(port) && HANDED_OUT.add(port)) {
                    return port;
                }
            }
        }
        while (true) {
            try (ServerSocket socket = new ServerSocket(0)) {
                socket.setReuseAddress(true);
                if (HANDED_OUT.add(socket.getLocalPort())) {
                    return socket.getLocalPort();
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    private static boolean bindable(int port) {
        try (ServerSocket socket = new ServerSocket()) {
            socket.setReuseAddress(false);
            socket.bind(new InetSocketAddress(port));
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    /** The first port of the kernel's ephemeral range (Linux: /proc/sys/net/ipv4/ip_local_port_range; 32768 elsewhere). */
    private static int ephemeralLow() {
        try {
            return Integer.parseInt(Files.readString(Path.of("/proc/sys/net/ipv4/ip_local_port_range")).strip().split("\\s+")[0]);
        } catch (IOException | RuntimeException e) {
            return 32_768;
        }
    }

    private static String javaBinary() {
        return System.getProperty("lmcache.test.java", Path.of(System.getProperty("java.home"), "bin", "java").toString());
    }

    private static Path serverJar() {
        Path jar = Path.of(System.getProperty("lmcache.server.jar", "server/target/lmcache-server.jar"));
        if (!Files.isRegularFile(jar)) {
            throw new IllegalStateException("server jar not found at " + jar.toAbsolutePath() + "; integration tests run after `mvn package`");
        }
        return jar;
    }
}
