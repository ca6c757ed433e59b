package io.lmcache.server.it;

import io.lmcache.server.it.DeployKitIT.Instruction;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.xml.parsers.DocumentBuilderFactory;
import javax.xml.xpath.XPathConstants;
import javax.xml.xpath.XPathFactory;
import org.w3c.dom.Document;
import org.w3c.dom.NodeList;

/**
 * What the image needs from the checkout, derived from the checkout itself, held against the
 * Dockerfile's COPY instructions. The build stage needs every pom.xml of the root pom's
 * {@code <modules>} before its first Maven run (the reactor refuses a missing child module, even one
 * {@code -pl} leaves out), and the whole directory of every module the shipped module depends on
 * (its {@code io.lmcache} dependencies, transitively, any scope: {@code -am} builds them all). The
 * runtime stage needs the launchers the image runs (its links and health check, and every sibling
 * they exec through {@code $bin/NAME}), the jar they start ({@code $root/...} in bin/lmcache-server) and
 * the jar manifest's class-path folder, each at the path the launcher computes from its own location.
 */
record DockerfileCoverage(Path repo, List<String> modules, Map<String, String> moduleOfArtifact) {
    /** The module whose jar the image ships. */
    static final String SHIPPED = "server";
    private static final Pattern SIBLING = Pattern.compile("\\$\\{?bin}?/([A-Za-z0-9._-]+)");
    private static final Pattern BIN_PATH = Pattern.compile("/[A-Za-z0-9._/-]*/bin/[A-Za-z0-9._-]+");
    private static final Pattern LINK = Pattern.compile("\\bln\\s+-s[a-z]*\\s+(\\S+)\\s+(\\S+)");
    private static final Pattern ROOT_PATH = Pattern.compile("\\$\\{?root}?\"?/([A-Za-z0-9._/-]+/target/[A-Za-z0-9._-]+)");

    /** One COPY's effect: image path {@code dest} (and, for a directory, what is under it) comes from {@code source} in {@code from}. */
    record Mapping(String dest, String from, String source) {
        Optional<String> sourceOf(String path) {
            if (path.equals(dest)) {
                return Optional.of(source);
            }
            return path.startsWith(dest + "/") ? Optional.of(source + path.substring(dest.length())) : Optional.empty();
        }
    }

    /** A stage: its name, the COPYs in order, its WORKDIR at the end, and the instruction index of each mapping. */
    record Stage(String name, List<Mapping> copies, List<Integer> copyAt, List<Instruction> instructions, String workdir) {
        /**
         * Whether a COPY before instruction {@code before} puts {@code source} of {@code from} ("" the context) at {@code path}
         * (any such COPY: copies into one folder merge, and a later one does not hide an earlier one's files).
         */
        boolean provides(String path, String from, String source, int before) {
            for (int i = 0; i < copies.size() && copyAt.get(i) < before; i++) {
                Mapping copy = copies.get(i);
                if (copy.from().equals(from) && copy.sourceOf(path).filter(source::equals).isPresent()) {
                    return true;
                }
            }
            return false;
        }

        int firstRunContaining(String text) {
            for (int i = 0; i < instructions.size(); i++) {
                if (instructions.get(i).keyword().equals("RUN") && instructions.get(i).args().contains(text)) {
                    return i;
                }
            }
            return instructions.size();
        }

        int lastRunContaining(String text) {
            for (int i = instructions.size() - 1; i >= 0; i--) {
                if (instructions.get(i).keyword().equals("RUN") && instructions.get(i).args().contains(text)) {
                    return i;
                }
            }
            return instructions.size();
        }
    }

    static DockerfileCoverage of(Path repo) throws Exception {
        List<String> modules = xpathAll(pom(repo.resolve("pom.xml")), "/project/modules/module");
        Map<String, String> moduleOfArtifact = new LinkedHashMap<>();
        for (String module : modules) {
            moduleOfArtifact.put(xpathAll(pom(repo.resolve(module).resolve("pom.xml")), "/project/artifactId").getFirst(), module);
        }
        return new DockerfileCoverage(repo, modules, moduleOfArtifact);
    }

    /** The shipped module and every sibling module it depends on, transitively. */
    Set<String> shippedClosure() throws Exception {
        Set<String> closure = new LinkedHashSet<>();
        Deque<String> todo = new ArrayDeque<>(List.of(SHIPPED));
        while (!todo.isEmpty()) {
            String module = todo.pop();
            if (closure.add(module)) {
                Document pom = pom(repo.resolve(module).resolve("pom.xml"));
                for (String artifact : xpathAll(pom, "/project/dependencies/dependency[groupId='io.lmcache']/artifactId")) {
                    todo.push(moduleOfArtifact.getOrDefault(artifact, "?" + artifact));
                }
            }
        }
        return closure;
    }

    /**
     * The launchers the image runs, image path to bin/ file: the paths its instructions name under a bin/ (the health check,
     * the links' targets: {@code ln -s TARGET NAME} is followed), and the siblings each execs ({@code $bin/NAME}) next to it.
     */
    Map<String, String> launchers(List<Instruction> runtime) throws Exception {
        Set<String> names = new TreeSet<>();
        try (var files = Files.list(repo.resolve("bin"))) {
            files.forEach(file -> names.add(file.getFileName().toString()));
        }
        Map<String, String> links = new LinkedHashMap<>();
        for (Instruction instruction : runtime) {
            Matcher link = LINK.matcher(instruction.keyword().equals("RUN") ? instruction.args() : "");
            while (link.find()) {
                links.put(link.group(2), link.group(1));
            }
        }
        Map<String, String> launchers = new LinkedHashMap<>();
        Deque<String> todo = new ArrayDeque<>();
        // not COPY: what the image copies is what is checked, the paths it runs are what it needs
        for (Instruction instruction : runtime.stream().filter(i -> !i.keyword().equals("COPY")).toList()) {
            Matcher path = BIN_PATH.matcher(instruction.args());
            while (path.find()) {
                todo.add(path.group());
            }
        }
        while (!todo.isEmpty()) {
            String path = todo.pop();
            for (int hops = 0; links.containsKey(path) && hops < 8; hops++) {
                path = links.get(path);
            }
            String name = path.substring(path.lastIndexOf('/') + 1);
            if (names.contains(name) && launchers.putIfAbsent(path, name) == null) {
                Matcher sibling = SIBLING.matcher(code(repo.resolve("bin").resolve(name)));
                while (sibling.find()) {
                    todo.add(path.substring(0, path.lastIndexOf('/') + 1) + sibling.group(1));
                }
            }
        }
        return launchers;
    }

    /**
     * The build outputs the launchers open ({@code $root/.../target/...}, root the folder above the launcher's bin/) and the
     * jar manifest's class-path folder next to the jar: image path to path in the source tree.
     */
    Map<String, String> launcherOutputs(Map<String, String> launchers) throws Exception {
        Map<String, String> outputs = new LinkedHashMap<>();
        for (Map.Entry<String, String> launcher : launchers.entrySet()) {
            String root = launcher.getKey().substring(0, launcher.getKey().lastIndexOf("/bin/") + 1);
            Matcher path = ROOT_PATH.matcher(code(repo.resolve("bin").resolve(launcher.getValue())));
            while (path.find()) {
                outputs.put(root + path.group(1), path.group(1));
                if (path.group(1).endsWith(".jar")) {
                    String dir = path.group(1).substring(0, path.group(1).lastIndexOf('/') + 1);
                    for (String prefix : xpathAll(pom(repo.resolve(SHIPPED).resolve("pom.xml")), "//manifest/classpathPrefix")) {
                        outputs.put(root + dir + prefix.replaceAll("/+$", ""), dir + prefix.replaceAll("/+$", ""));
                    }
                }
            }
        }
        return outputs;
    }

    /** Everything the Dockerfile misses, one line each; empty when the image gets all it needs. */
    List<String> problems(List<Instruction> dockerfile) throws Exception {
        List<Stage> stages = stages(dockerfile);
        List<String> problems = new ArrayList<>();
        if (stages.size() < 2) {
            return List.of("no build and runtime stages");
        }
        Stage build = stages.getFirst();
        Stage runtime = stages.getLast();
        String src = build.workdir();
        int firstMaven = build.firstRunContaining("mvn ");
        int packaging = build.lastRunContaining("mvn ");
        requireFromContext(build, src + "/pom.xml", "pom.xml", firstMaven, "the root pom before the first Maven run", problems);
        for (String module : modules) {
            requireFromContext(build, src + "/" + module + "/pom.xml", module + "/pom.xml", firstMaven,
                    "module " + module + "'s pom.xml before the first Maven run (pom.xml lists it in <modules>)", problems);
        }
        for (String module : shippedClosure()) {
            requireFromContext(build, src + "/" + module, module, packaging,
                    "module " + module + " (all of it) before the packaging Maven run (" + SHIPPED + " needs it)", problems);
        }
        Map<String, String> launchers = launchers(runtime.instructions());
        if (launchers.isEmpty()) {
            problems.add("the runtime stage runs no launcher of bin/");
        }
        for (Map.Entry<String, String> launcher : launchers.entrySet()) {
            String builtAt = src + "/bin/" + launcher.getValue();
            requireFromBuild(runtime, build.name(), launcher.getKey(), builtAt, "launcher bin/" + launcher.getValue(), problems);
            requireFromContext(build, builtAt, "bin/" + launcher.getValue(), build.instructions().size(),
                    "launcher bin/" + launcher.getValue() + " in the build stage", problems);
        }
        for (Map.Entry<String, String> output : launcherOutputs(launchers).entrySet()) {
            requireFromBuild(runtime, build.name(), output.getKey(), src + "/" + output.getValue(),
                    output.getValue() + " where the launcher looks for it", problems);
        }
        return problems;
    }

    private static void requireFromContext(Stage stage, String imagePath, String contextPath, int before, String what, List<String> problems) {
        if (!stage.provides(imagePath, "", contextPath, before)) {
            problems.add("stage " + stage.name() + " lacks " + what + ": no COPY " + contextPath + " to " + imagePath);
        }
    }

    private static void requireFromBuild(Stage runtime, String build, String imagePath, String builtAt, String what, List<String> problems) {
        if (!runtime.provides(imagePath, build, builtAt, runtime.instructions().size())) {
            problems.add("the runtime image lacks " + what + ": no COPY --from=" + build + " " + builtAt + " to " + imagePath);
        }
    }

    /** The stages with their COPYs resolved against WORKDIR (a context source that is a directory copies its contents). */
    List<Stage> stages(List<Instruction> dockerfile) {
        List<Stage> stages = new ArrayList<>();
        List<Instruction> current = null;
        for (Instruction instruction : dockerfile) {
            if (instruction.keyword().equals("FROM")) {
                current = new ArrayList<>();
                stages.add(new Stage(stageName(instruction.args(), stages.size()), new ArrayList<>(), new ArrayList<>(), current, "/"));
            }
            if (current != null) {
                current.add(instruction);
            }
        }
        List<Stage> resolved = new ArrayList<>();
        for (Stage stage : stages) {
            resolved.add(resolve(stage));
        }
        return resolved;
    }

    private Stage resolve(Stage stage) {
        String workdir = "/";
        for (int i = 0; i < stage.instructions().size(); i++) {
            Instruction instruction = stage.instructions().get(i);
            if (instruction.keyword().equals("WORKDIR")) {
                workdir = absolute(workdir, instruction.args());
            } else if (instruction.keyword().equals("COPY") || instruction.keyword().equals("ADD")) {
                for (Mapping mapping : copy(instruction.args(), workdir)) {
                    stage.copies().add(mapping);
                    stage.copyAt().add(i);
                }
            }
        }
        return new Stage(stage.name(), stage.copies(), stage.copyAt(), stage.instructions(), workdir);
    }

    private List<Mapping> copy(String args, String workdir) {
        List<String> words = new ArrayList<>(List.of(args.strip().split("\\s+")));
        String from = "";
        while (!words.isEmpty() && words.getFirst().startsWith("--")) {
            String flag = words.removeFirst();
            if (flag.startsWith("--from=")) {
                from = flag.substring("--from=".length());
            }
        }
        if (!words.isEmpty() && words.getFirst().startsWith("[")) {
            words = new ArrayList<>(List.of(String.join(" ", words).replaceAll("^\\[|]$", "").split("\"\\s*,\\s*\"")));
            words.replaceAll(word -> word.strip().replaceAll("^\"|\"$", ""));
        }
        String dest = absolute(workdir, words.getLast());
        boolean intoDir = words.getLast().endsWith("/") || words.size() > 2;
        List<Mapping> mappings = new ArrayList<>();
        for (String raw : words.subList(0, words.size() - 1)) {
            String source = raw.replaceAll("^\\./", "").replaceAll("(.)/+$", "$1");
            boolean directory = from.isEmpty() ? Files.isDirectory(repo.resolve(source)) : !intoDir;
            String name = source.substring(source.lastIndexOf('/') + 1);
            mappings.add(new Mapping(intoDir && !directory ? dest + "/" + name : dest, from, source));
        }
        return mappings;
    }

    private static String absolute(String workdir, String path) {
        String joined = path.startsWith("/") ? path : workdir + "/" + path;
        return "/" + String.join("/", List.of(joined.split("/+")).stream().filter(part -> !part.isEmpty() && !part.equals(".")).toList());
    }

    private static String stageName(String fromArgs, int index) {
        String[] words = fromArgs.split("\\s+");
        return words.length >= 3 && words[words.length - 2].equalsIgnoreCase("AS") ? words[words.length - 1] : Integer.toString(index);
    }

    /** A script without its comment lines (bin/lmcache-server's comments name other launchers). */
    private static String code(Path script) throws Exception {
        return String.join("\n", Files.readAllLines(script).stream().filter(line -> !line.strip().startsWith("#")).toList());
    }

    private static Document pom(Path file) throws Exception {
        return DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(file.toFile());
    }

    private static List<String> xpathAll(Document document, String expression) throws Exception {
        NodeList nodes = (NodeList) XPathFactory.newInstance().newXPath().evaluate(expression, document, XPathConstants.NODESET);
        List<String> values = new ArrayList<>();
        for (int i = 0; i < nodes.getLength(); i++) {
            values.add(nodes.item(i).getTextContent().strip());
        }
        return values;
    }
}
