package io.lmcache.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.metrics.Catalogues;
import io.lmcache.server.protocol.testing.Golden;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The structure the sources must keep (issue 29), read from the main sources of every module: no package cycle of any
 * length, metric names only in the catalogues of {@code metrics/}, a {@code metrics/} that names no other server package but
 * the logging leaf, and {@code -Dlmcache.*} knobs read only by {@code config/}. The scanner itself is tested on synthetic
 * input, so a reintroduced cycle fails here.
 */
class ArchitectureTest {
    private static final List<String> MODULES = List.of("protocol", "config", "cuda", "server", "l2");
    private static final String ROOT_PACKAGE = "io.lmcache.server";
    private static final Pattern IMPORT = Pattern.compile("^import (?:static )?((?:[a-z_]\\w*\\.)+)[A-Z]", Pattern.MULTILINE);
    /** A fully-qualified reference in code (javadoc included): package, then a type name. */
    private static final Pattern QUALIFIED = Pattern.compile("\\b(io\\.lmcache\\.server(?:\\.[a-z_]\\w*)*)\\.[A-Z]\\w*");
    private static final Pattern HEADER_LINE = Pattern.compile("^(import|package) .*$", Pattern.MULTILINE);
    private static final String METRICS_DIR = "server/src/main/java/io/lmcache/server/metrics/";
    private static final Pattern METRIC_LITERAL = Pattern.compile("\"lmcache_mp[._]");
    private static final Pattern KNOB_READ =
            Pattern.compile("(?:System\\.getProperty|Integer\\.getInteger|Long\\.getLong|Boolean\\.getBoolean)\\(\\s*\"lmcache\\.");
    /** What metrics/ may name of the server: the logging leaf (its rate-limited lines and log counters). */
    private static final Set<String> METRICS_MAY_USE = Set.of("io.lmcache.server.logging");

    /** Main source files of every module, path relative to the repository root (forward slashes) to text. */
    private static Map<String, String> sources() {
        Path root = Golden.repoRoot();
        Map<String, String> out = new TreeMap<>();
        for (String module : MODULES) {
            Path dir = root.resolve(module).resolve("src/main/java");
            try (Stream<Path> files = Files.walk(dir)) {
                for (Path file : files.filter(f -> f.toString().endsWith(".java")).toList()) {
                    out.put(root.relativize(file).toString().replace('\\', '/'), Files.readString(file));
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        assertTrue(out.keySet().stream().anyMatch(f -> f.endsWith("/LmcacheServer.java")), "the scan found the server's sources");
        return out;
    }

    static String packageOf(String path) {
        String inside = path.substring(path.indexOf("src/main/java/") + "src/main/java/".length());
        return inside.substring(0, inside.lastIndexOf('/')).replace('/', '.');
    }

    /** The edges between io.lmcache.server packages: imports and fully-qualified references, self-edges left out. */
    static Map<String, Set<String>> packageGraph(Map<String, String> sources) {
        Map<String, Set<String>> edges = new TreeMap<>();
        sources.forEach((path, text) -> {
            String from = packageOf(path);
            Set<String> to = edges.computeIfAbsent(from, p -> new TreeSet<>());
            Matcher imports = IMPORT.matcher(text);
            while (imports.find()) {
                to.add(imports.group(1).substring(0, imports.group(1).length() - 1));
            }
            Matcher qualified = QUALIFIED.matcher(HEADER_LINE.matcher(text).replaceAll(""));
            while (qualified.find()) {
                to.add(qualified.group(1));
            }
            to.removeIf(p -> p.equals(from) || !p.startsWith(ROOT_PACKAGE));
        });
        return edges;
    }

    /** Tarjan's strongly connected components of more than one package: each is a cycle (of any length). */
    static List<List<String>> cycles(Map<String, Set<String>> edges) {
        return new Tarjan(edges).run();
    }

    /** Tarjan's algorithm, recursive (a few dozen packages). */
    private static final class Tarjan {
        private final Map<String, Set<String>> edges;
        private final Map<String, Integer> index = new HashMap<>();
        private final Map<String, Integer> low = new HashMap<>();
        private final Deque<String> stack = new ArrayDeque<>();
        private final Set<String> onStack = new HashSet<>();
        private final List<List<String>> components = new ArrayList<>();

        Tarjan(Map<String, Set<String>> edges) {
            this.edges = edges;
        }

        List<List<String>> run() {
            for (String node : new TreeSet<>(edges.keySet())) {
                if (!index.containsKey(node)) {
                    visit(node);
                }
            }
            return components;
        }

        private void visit(String node) {
            index.put(node, index.size());
            low.put(node, index.get(node));
            stack.push(node);
            onStack.add(node);
            for (String next : edges.getOrDefault(node, Set.of())) {
                if (!index.containsKey(next)) {
                    visit(next);
                    low.put(node, Math.min(low.get(node), low.get(next)));
                } else if (onStack.contains(next)) {
                    low.put(node, Math.min(low.get(node), index.get(next)));
                }
            }
            if (low.get(node).equals(index.get(node))) {
                List<String> component = new ArrayList<>();
                String member;
                do {
                    member = stack.pop();
                    onStack.remove(member);
                    component.add(member);
                } while (!member.equals(node));
                if (component.size() > 1) {
                    component.sort(null);
                    components.add(component);
                }
            }
        }
    }

    private static String fileName(String path) {
        return path.substring(path.lastIndexOf('/') + 1);
    }

    @Test
    void noPackageCycleOfAnyLength() {
        assertEquals(List.of(), cycles(packageGraph(sources())), "package cycles (strongly connected components)");
    }

    @Test
    void theScannerFindsCyclesOfEveryLengthAndOnlyThem() {
        // a -> b -> c -> a (length 3) and d <-> e (length 2); f hangs off the cycle without being in it
        Map<String, Set<String>> graph = Map.of("a", Set.of("b"), "b", Set.of("c"), "c", Set.of("a", "f"), "d", Set.of("e"), "e",
                Set.of("d"), "f", Set.of());
        assertEquals(List.of(List.of("a", "b", "c"), List.of("d", "e")),
                cycles(graph).stream().sorted((x, y) -> x.getFirst().compareTo(y.getFirst())).toList());
        assertEquals(List.of(), cycles(Map.of("a", Set.of("b"), "b", Set.of("c"), "c", Set.of())), "a chain is no cycle");
        // the edges come from imports, static imports and qualified references (comments included), never from the package itself
        Map<String, String> sources = Map.of(
                "server/src/main/java/io/lmcache/server/liveness/Reaper.java",
                "package " + ROOT_PACKAGE + ".liveness;\n\nimport " + ROOT_PACKAGE + ".loop.Dispatcher;\nclass Reaper {}\n",
                "server/src/main/java/io/lmcache/server/loop/Dispatcher.java",
                "package " + ROOT_PACKAGE + ".loop;\n\nimport static " + ROOT_PACKAGE + ".metrics.Catalogues.ALL;\nclass Dispatcher {}\n",
                "server/src/main/java/io/lmcache/server/metrics/Binder.java",
                "package " + ROOT_PACKAGE + ".metrics;\n\nclass Binder { /** {@link " + ROOT_PACKAGE + ".liveness.Reaper} */ "
                        + ROOT_PACKAGE + ".metrics.Binder self; }\n");
        Map<String, Set<String>> edges = packageGraph(sources);
        assertEquals(Set.of("io.lmcache.server.liveness"), edges.get("io.lmcache.server.metrics"));
        assertEquals(List.of(List.of("io.lmcache.server.liveness", "io.lmcache.server.loop", "io.lmcache.server.metrics")), cycles(edges),
                "the cycle liveness -> loop -> metrics this issue removed");
    }

    @Test
    void metricNamesAreWrittenOnlyInTheCataloguesOfMetrics() {
        Set<String> outside = sources().entrySet().stream().filter(e -> METRIC_LITERAL.matcher(e.getValue()).find())
                .map(Map.Entry::getKey).filter(path -> !mayNameMetrics(path)).collect(Collectors.toCollection(TreeSet::new));
        assertEquals(Set.of(), outside, "files naming a metric outside metrics/*Catalogue.java");
    }

    private static boolean isCatalogue(String path) {
        return path.startsWith(METRICS_DIR) && path.endsWith("Catalogue.java");
    }

    /** A catalogue's file, or MeterSpec, which refuses a name outside the {@code lmcache_mp.} namespace. */
    private static boolean mayNameMetrics(String path) {
        return isCatalogue(path) || path.equals(METRICS_DIR + "MeterSpec.java");
    }

    @Test
    void everyCatalogueIsCheckedForDuplicateNames() {
        Set<String> files = sources().keySet().stream().filter(ArchitectureTest::isCatalogue).map(ArchitectureTest::fileName)
                .collect(Collectors.toCollection(TreeSet::new));
        Set<String> listed = Catalogues.ALL.stream().map(c -> c.getSimpleName() + ".java").collect(Collectors.toCollection(TreeSet::new));
        assertEquals(files, listed, "Catalogues.ALL lists every catalogue file");
    }

    @Test
    void metricsNamesNoServerPackageButTheLoggingLeaf() {
        Map<String, Set<String>> edges = packageGraph(sources());
        Set<String> used = new TreeSet<>(edges.get("io.lmcache.server.metrics"));
        used.removeAll(METRICS_MAY_USE);
        assertEquals(Set.of(), used, "metrics/ is a leaf: the owners of the counts bind their meters");
        assertEquals(Set.of(), edges.getOrDefault("io.lmcache.server.logging", Set.of()), "logging is a leaf");
    }

    @Test
    void lmcacheKnobsAreReadOnlyByTheConfiguration() {
        Set<String> readers = sources().entrySet().stream().filter(e -> !e.getKey().contains("/io/lmcache/server/config/"))
                .filter(e -> KNOB_READ.matcher(e.getValue()).find()).map(e -> fileName(e.getKey()))
                .collect(Collectors.toCollection(TreeSet::new));
        // the knobs are config's Tuning record, read once at start and shown by /config
        assertEquals(Set.of(), readers, "-Dlmcache.* read outside config/");
    }
}
