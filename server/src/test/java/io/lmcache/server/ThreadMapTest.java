package io.lmcache.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.config.ConfigLoader;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.testing.ServerProcess;
import io.lmcache.server.testing.TestClient;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The thread map in this package's {@code package-info.java} against the threads of a real server, both ways: every
 * thread the server (and the libraries it drives) starts is named in the map's first column, and every kind the map
 * names runs in this server, unless it is one that this host-only server cannot have or that ends by itself
 * ({@link #NOT_SEEN_HERE}).
 */
class ThreadMapTest {
    private static final Path MAP = Path.of("src/main/java/io/lmcache/server/package-info.java");
    /** A row's first cell. */
    private static final Pattern FIRST_CELL = Pattern.compile("<tr><td>(.*?)</td>", Pattern.DOTALL);
    private static final Pattern CODE = Pattern.compile("\\{@code ([A-Za-z][A-Za-z0-9_.-]*)}");

    /**
     * Map kinds this test's server cannot show: the test JVM's own {@code main}, virtual threads (not listed by
     * {@link Thread#getAllStackTraces}) and their JVM-wide carriers (started by an earlier test in this JVM, or not),
     * CUDA and NUMA ones on a host-only server, one-shot threads that may have ended (the pool's preparation, the
     * start-up warm-up, which small hosts skip), the shutdown paths and the test hooks.
     */
    private static final Set<String> NOT_SEEN_HERE = Set.of("main", "lmcache-http-N", "ForkJoinPool-N-worker-N",
            "VirtualThread-unblocker", "lmcache-cuda-events", "lmcache-pool-pin-N",
            "lmcache-numa-probe", "lmcache-gpu-warmup-DEVICE", "lmcache-gpu-warmup-pin-N", "lmcache-pool-prepare-N",
            "lmcache-warmup-loop", "lmcache-warmup", "lmcache-shutdown", "lmcache-stop-on-failure", "lmcache-shutdown-on-failure",
            "lmcache-test-completions");

    @TempDir
    Path l2Dir;

    @Test
    void theThreadMapNamesEveryThreadOfARunningServerAndNoOtherKind() throws Exception {
        Map<String, Pattern> map = mapKinds();
        assertTrue(map.keySet().containsAll(NOT_SEEN_HERE), "kinds set aside here that the map lacks: " + missing(NOT_SEEN_HERE, map));
        int port = ServerProcess.freePort();
        int httpPort = ServerProcess.freePort();
        Set<Thread> notTheServers = new HashSet<>(Thread.getAllStackTraces().keySet());
        LmcacheServer server = LmcacheServer.start(config(port, httpPort));
        List<String> live;
        try {
            Set<Thread> started = new HashSet<>(Thread.getAllStackTraces().keySet());
            try (TestClient client = new TestClient("tcp://127.0.0.1:" + port)) {
                notTheClients(started, notTheServers); // the client's own ZeroMQ context's threads bear JeroMQ's names too
                exerciseEveryPool(client, httpPort);
                live = threadNames(notTheServers);
            }
        } finally {
            server.close();
            server.awaitStopped();
        }
        List<String> unmapped = live.stream().filter(name -> map.values().stream().noneMatch(p -> p.matcher(name).matches())).toList();
        assertEquals(List.of(), unmapped, "threads the map in package-info.java does not name");
        Set<String> absent = new TreeSet<>();
        map.forEach((kind, pattern) -> {
            if (!NOT_SEEN_HERE.contains(kind) && live.stream().noneMatch(name -> pattern.matcher(name).matches())) {
                absent.add(kind);
            }
        });
        assertEquals(Set.of(), absent, "kinds the map names that this server does not run (live: " + live + ")");
    }

    /** A server with an fs_native L2 adapter, so the L2 threads run too. */
    private ServerConfig config(int port, int httpPort) {
        String[] args = {"--host", "127.0.0.1", "--port", Integer.toString(port), "--http-host", "127.0.0.1", "--http-port",
            Integer.toString(httpPort), "--l1-size-gb", "0.016", "--device", "host", "--shm-name",
            "lmcache_test_threads_" + ProcessHandle.current().pid(), "--l2-adapter",
            "{\"type\":\"fs_native\",\"base_path\":\"" + l2Dir + "\"}", "--lookup-hash-log-dir", l2Dir.resolve("lookup-hashes").toString()};
        return ((ConfigLoader.Outcome.Run) ConfigLoader.load(args, Map.of())).config();
    }

    /** The dispatcher's pools start their threads on first use: a request for each, and one HTTP request. */
    private static void exerciseEveryPool(TestClient client, int httpPort) throws IOException {
        assertEquals(2, client.call(20, TestClient.pack(p -> p.packBoolean(false))).frames(), "CLEAR (lmcache-normal-N)");
        assertEquals(2, client.call(2, TestClient.pack(p -> p.packInt(7))).frames(), "UNREGISTER_KV_CACHE (lmcache-transfer-N)");
        client.sendRaw(TestClient.pack(p -> p.packString("poll")), TestClient.pack(p -> p.packInt(34)),
                TestClient.pack(p -> p.packString("m")), TestClient.pack(p -> p.packLong(0)), TestClient.pack(p -> p.packInt(8)));
        assertEquals(3, client.receive(Duration.ofSeconds(10)).frames(), "POLL_KV_EVENTS (lmcache-background-N)");
        // a bare socket, not an HTTP client: that would start threads of its own in this JVM
        try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), httpPort)) {
            OutputStream out = socket.getOutputStream();
            out.write("GET /healthcheck HTTP/1.0\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            out.flush();
            InputStream in = socket.getInputStream();
            String head = new String(in.readNBytes(12), StandardCharsets.US_ASCII);
            assertTrue(head.startsWith("HTTP/1.1 200"), head);
        }
    }

    /** Adds the threads that appeared since {@code before} (the client's) to {@code notTheServers}. */
    private static void notTheClients(Set<Thread> before, Set<Thread> notTheServers) {
        for (Thread thread : Thread.getAllStackTraces().keySet()) {
            if (!before.contains(thread)) {
                notTheServers.add(thread);
            }
        }
    }

    private static List<String> threadNames(Set<Thread> except) {
        List<String> names = new ArrayList<>();
        for (Thread thread : Thread.getAllStackTraces().keySet()) {
            if (!except.contains(thread) && thread.isAlive()) {
                names.add(thread.getName());
            }
        }
        names.sort(null);
        return names;
    }

    /** The kinds named in the first column of the thread map, each with the pattern of the names it stands for. */
    static Map<String, Pattern> mapKinds() throws IOException {
        String source = Files.readString(MAP);
        Map<String, Pattern> kinds = new LinkedHashMap<>();
        Matcher cell = FIRST_CELL.matcher(source.replace("\n *", " "));
        while (cell.find()) {
            Matcher code = CODE.matcher(cell.group(1));
            while (code.find()) {
                kinds.put(code.group(1), pattern(code.group(1)));
            }
        }
        assertTrue(kinds.size() > 10, "the map's first column was not found in " + MAP + ": " + kinds.keySet());
        return kinds;
    }

    /** {@code N} and {@code I} stand for a number, {@code TYPE} for an adapter type, {@code DEVICE} for a device name. */
    private static Pattern pattern(String kind) {
        List<String> parts = new ArrayList<>();
        for (String part : kind.split("-", -1)) {
            parts.add(switch (part) {
                case "N", "I" -> "\\d+";
                case "TYPE" -> "[a-z0-9_]+";
                case "DEVICE" -> "[A-Za-z0-9_:.]+";
                default -> Pattern.quote(part);
            });
        }
        return Pattern.compile(String.join("-", parts));
    }

    private static Set<String> missing(Set<String> wanted, Map<String, Pattern> map) {
        Set<String> out = new TreeSet<>(wanted);
        out.removeAll(map.keySet());
        return out;
    }
}
