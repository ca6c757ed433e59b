package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLMapper;
import io.lmcache.server.protocol.testing.Golden;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The container and deploy kit, checked by parsers (the image itself is built after the tests, by ci-image-check.sh; OperatorIT runs
 * the image's entry point through its links, ContainerImageIT the image itself where one is built):
 * the Dockerfile's stages, runtime, labels, user, ports, health check and entrypoint; compose, the
 * Kubernetes variants, the systemd unit; and that every metric the dashboards and alert rules query
 * is one the server exports.
 */
@ExtendWith(ServerLogOnFailure.class)
class DeployKitIT {
    private static final Path ROOT = Golden.repoRoot();
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final YAMLMapper YAML = new YAMLMapper();

    /** One Dockerfile instruction: keyword and arguments (continuations joined, comments dropped). */
    record Instruction(String keyword, String args) {}

    static List<Instruction> parseDockerfile(Path file) throws Exception {
        return parseDockerfile(Files.readAllLines(file));
    }

    static List<Instruction> parseDockerfile(List<String> lines) {
        List<Instruction> instructions = new ArrayList<>();
        StringBuilder pending = new StringBuilder();
        for (String raw : lines) {
            String line = raw.strip();
            if (pending.isEmpty() && (line.isEmpty() || line.startsWith("#"))) {
                continue;
            }
            if (line.endsWith("\\")) {
                pending.append(line, 0, line.length() - 1).append(' ');
                continue;
            }
            pending.append(line);
            String whole = pending.toString().strip();
            pending.setLength(0);
            int space = whole.indexOf(' ');
            if (space < 0) {
                throw new AssertionError("instruction without arguments: " + whole);
            }
            instructions.add(new Instruction(whole.substring(0, space).toUpperCase(Locale.ROOT), whole.substring(space + 1).strip()));
        }
        assertTrue(pending.isEmpty(), "a continuation runs off the end of the Dockerfile");
        return instructions;
    }

    @Test
    void dockerfileIsAMultiStageNonRootImageOnAJlinkedRuntimeWithoutCurl() throws Exception {
        List<Instruction> all = parseDockerfile(ROOT.resolve("Dockerfile"));
        Set<String> known = Set.of("FROM", "WORKDIR", "COPY", "RUN", "USER", "EXPOSE", "HEALTHCHECK", "ENTRYPOINT", "CMD", "ENV", "ARG", "LABEL");
        for (Instruction instruction : all) {
            assertTrue(known.contains(instruction.keyword()), "unknown instruction " + instruction);
        }
        List<Integer> stages = new ArrayList<>();
        for (int i = 0; i < all.size(); i++) {
            if (all.get(i).keyword().equals("FROM")) {
                stages.add(i);
            }
        }
        assertTrue(stages.size() >= 2, "multi-stage");
        assertTrue(all.get(stages.getFirst()).args().matches("\\S+ AS build"), "the first stage is named build");
        List<Instruction> build = all.subList(stages.getFirst(), stages.getLast());
        assertTrue(build.stream().anyMatch(i -> i.keyword().equals("RUN") && i.args().startsWith("jlink ")), "a jlinked runtime is made");
        assertTrue(build.stream().anyMatch(i -> i.keyword().equals("RUN") && i.args().contains("-Dlmcache.commit=")), "the commit is built in");
        List<Instruction> runtime = all.subList(stages.getLast(), all.size());
        String user = last(runtime, "USER");
        assertFalse(user.equals("root") || user.equals("0"), "runs as a non-root user, got " + user);
        assertFalse(runtime.stream().anyMatch(i -> i.args().contains("curl") && !i.keyword().equals("LABEL")), "no curl in the image");
        assertTrue(runtime.stream().anyMatch(i -> i.keyword().equals("COPY") && i.args().startsWith("--from=build /opt/java/runtime ")));
        assertTrue(runtime.stream().anyMatch(i -> i.keyword().equals("ENV") && i.args().equals("JAVA_HOME=/opt/java/runtime")));
        String labels = runtime.stream().filter(i -> i.keyword().equals("LABEL")).map(Instruction::args).reduce("", String::concat);
        for (String key : List.of("title", "description", "licenses", "version", "revision")) {
            assertTrue(labels.contains("org.opencontainers.image." + key + "="), "OCI label " + key + " in " + labels);
        }
        Set<String> ports = new TreeSet<>(List.of(last(runtime, "EXPOSE").split("\\s+")));
        assertEquals(Set.of("5555", "8080", "9090"), ports);
        assertEquals(List.of("/opt/lmcache-server/bin/lmcache-healthcheck"),
                JSON.readValue(last(runtime, "HEALTHCHECK").replaceFirst("^.*CMD ", ""), List.class));
        assertEquals(List.of("lmcache-server"), JSON.readValue(last(runtime, "ENTRYPOINT"), List.class), "through the link on PATH");
        String links = runtime.stream().filter(i -> i.keyword().equals("RUN") && i.args().contains("ln -s")).map(Instruction::args)
                .reduce("", String::concat);
        assertTrue(links.contains("/opt/lmcache-server/bin/lmcache-server /usr/local/bin/lmcache-server"), links);
        assertTrue(links.contains("/opt/lmcache-server/bin/lmcache /opt/venv/bin/lmcache"), "where LMCache's operator runs lmcache: " + links);
        // every path the image copies from the context exists in the repository
        for (Instruction instruction : all) {
            if (instruction.keyword().equals("COPY") && !instruction.args().startsWith("--from=")) {
                String[] parts = instruction.args().split("\\s+");
                for (int p = 0; p < parts.length - 1; p++) {
                    assertTrue(Files.exists(ROOT.resolve(parts[p])), "COPY source " + parts[p] + " exists");
                }
            }
        }
        assertTrue(Files.readString(ROOT.resolve("LICENSE")).contains("Apache License"), "the image ships the license");
    }

    @Test
    void composeTakesTheTokenFromTheEnvironmentAndRestartsOnFailure() throws Exception {
        JsonNode compose = YAML.readTree(ROOT.resolve("deploy/compose/docker-compose.yml").toFile());
        JsonNode server = compose.get("services").get("lmcache-server");
        JsonNode vllm = compose.get("services").get("vllm");
        assertEquals("host", server.get("ipc").asText());
        assertEquals("host", vllm.get("ipc").asText(), "CUDA IPC needs one IPC namespace");
        assertFalse(server.has("shm_size"), "shm_size does nothing with ipc: host");
        assertEquals("gpu", server.at("/deploy/resources/reservations/devices/0/capabilities/0").asText());
        assertEquals("gpu", vllm.at("/deploy/resources/reservations/devices/0/capabilities/0").asText());
        assertEquals(-1, server.at("/ulimits/memlock").asInt(), "pinning needs memlock");
        String serverCommand = server.get("command").toString();
        assertFalse(serverCommand.contains("token"), "no token on the command line: " + serverCommand);
        assertTrue(server.at("/environment/LMCACHE_HTTP_ADMIN_TOKEN").asText().matches("\\$\\{LMCACHE_HTTP_ADMIN_TOKEN:\\?.+}"),
                "the token comes from the environment, required, no default");
        assertEquals("/opt/lmcache-server/bin/lmcache-healthcheck", server.at("/healthcheck/test/1").asText());
        assertTrue(Set.of("unless-stopped", "always", "on-failure").contains(server.get("restart").asText()), "exit 3 is restarted");
        String vllmCommand = vllm.get("command").toString();
        assertTrue(vllmCommand.contains("LMCacheMPConnector"));
        assertTrue(vllmCommand.contains("lmcache.mp.port\\\":5555") && serverCommand.contains("\"5555\""), "the same port on both sides");
        assertEquals("service_healthy", vllm.at("/depends_on/lmcache-server/condition").asText());
    }

    @Test
    void kubernetesPodRunsTheServerAsANativeSidecarOnTheNvidiaRuntime() throws Exception {
        JsonNode pod = YAML.readTree(ROOT.resolve("deploy/kubernetes/vllm-with-lmcache.yaml").toFile());
        assertEquals("Pod", pod.get("kind").asText());
        assertEquals("nvidia", pod.at("/spec/runtimeClassName").asText());
        JsonNode annotations = pod.at("/metadata/annotations");
        assertEquals("true", annotations.get("prometheus.io/scrape").asText());
        assertEquals("/metrics", annotations.get("prometheus.io/path").asText());
        JsonNode sidecar = pod.at("/spec/initContainers/0");
        assertEquals("lmcache-server", sidecar.get("name").asText());
        assertEquals("Always", sidecar.get("restartPolicy").asText(), "a native sidecar: started before vLLM, stopped after it");
        assertEquals("/healthcheck", sidecar.at("/startupProbe/httpGet/path").asText(), "vLLM starts once the server is healthy");
        assertEquals("/healthcheck", sidecar.at("/readinessProbe/httpGet/path").asText());
        assertEquals(annotations.get("prometheus.io/port").asText(), sidecar.at("/ports/0/containerPort").asText());
        JsonNode vllm = pod.at("/spec/containers/0");
        assertEquals("vllm", vllm.get("name").asText());
        assertEquals(1, pod.at("/spec/containers").size());
        JsonNode volume = pod.at("/spec/volumes/0");
        assertEquals("Memory", volume.at("/emptyDir/medium").asText());
        for (JsonNode container : List.of(sidecar, vllm)) {
            assertTrue(mounts(container, volume.get("name").asText(), "/dev/shm"), container.get("name") + " mounts the shared /dev/shm");
        }
    }

    @Test
    void daemonSetVariantSharesTheHostIpcAndShmAndIsScrapedThroughItsNodeLocalService() throws Exception {
        List<JsonNode> docs = YAML.readValues(YAML.createParser(ROOT.resolve("deploy/kubernetes/daemonset/lmcache-server.yaml").toFile()),
                JsonNode.class).readAll();
        JsonNode daemonSet = kind(docs, "DaemonSet");
        JsonNode service = kind(docs, "Service");
        JsonNode monitor = kind(docs, "ServiceMonitor");
        JsonNode spec = daemonSet.at("/spec/template/spec");
        assertTrue(spec.get("hostIPC").asBoolean(), "CUDA IPC with vLLM pods of the node");
        assertEquals("nvidia", spec.get("runtimeClassName").asText());
        JsonNode container = spec.at("/containers/0");
        assertTrue(mounts(container, spec.at("/volumes/0/name").asText(), "/dev/shm"));
        assertEquals("/dev/shm", spec.at("/volumes/0/hostPath/path").asText());
        assertEquals("/healthcheck", container.at("/startupProbe/httpGet/path").asText());
        assertEquals("Local", service.at("/spec/internalTrafficPolicy").asText(), "each vLLM pod reaches its own node's server");
        JsonNode labels = daemonSet.at("/spec/template/metadata/labels");
        service.at("/spec/selector").fields().forEachRemaining(e -> assertEquals(e.getValue(), labels.get(e.getKey())));
        monitor.at("/spec/selector/matchLabels").fields().forEachRemaining(e -> assertEquals(e.getValue(),
                service.at("/metadata/labels").get(e.getKey())));
        assertEquals("http", monitor.at("/spec/endpoints/0/port").asText());
        assertEquals("/metrics", monitor.at("/spec/endpoints/0/path").asText());
        assertTrue(service.at("/spec/ports").toString().contains("\"name\":\"http\""));
        JsonNode vllm = YAML.readTree(ROOT.resolve("deploy/kubernetes/daemonset/vllm-deployment.yaml").toFile()).at("/spec/template/spec");
        assertTrue(vllm.get("hostIPC").asBoolean());
        assertEquals("/dev/shm", vllm.at("/volumes/0/hostPath/path").asText());
        assertTrue(vllm.at("/containers/0/args").toString().contains("tcp://" + service.at("/metadata/name").asText()),
                "vLLM connects through the node-local Service");
    }

    @Test
    void theServerContainersRunAsTheImagesUserWithoutPrivilegesOnAReadOnlyRoot() throws Exception {
        JsonNode pod = YAML.readTree(ROOT.resolve("deploy/kubernetes/vllm-with-lmcache.yaml").toFile());
        List<JsonNode> docs = YAML.readValues(YAML.createParser(ROOT.resolve("deploy/kubernetes/daemonset/lmcache-server.yaml").toFile()),
                JsonNode.class).readAll();
        Map<String, JsonNode> specs = Map.of("sidecar", pod.at("/spec"), "daemonset", kind(docs, "DaemonSet").at("/spec/template/spec"));
        String user = last(parseDockerfile(ROOT.resolve("Dockerfile")), "USER");
        String uid = Files.readString(ROOT.resolve("Dockerfile")).replaceFirst("(?s).*useradd [^\\n]*--uid (\\d+) .*", "$1");
        assertEquals("10001", uid, "the Dockerfile's " + user + " user");
        for (Map.Entry<String, JsonNode> entry : specs.entrySet()) {
            JsonNode spec = entry.getValue();
            JsonNode server = spec.at(entry.getKey().equals("sidecar") ? "/initContainers/0" : "/containers/0");
            JsonNode context = server.get("securityContext");
            String where = entry.getKey() + ": " + context;
            assertTrue(context.get("runAsNonRoot").asBoolean(), where);
            assertEquals(uid, context.get("runAsUser").asText(), where);
            assertEquals(uid, context.get("runAsGroup").asText(), where);
            assertEquals(uid, spec.at("/securityContext/fsGroup").asText(), where);
            assertFalse(context.get("allowPrivilegeEscalation").asBoolean(true), where);
            assertTrue(context.get("readOnlyRootFilesystem").asBoolean(), where);
            assertEquals("[\"ALL\"]", context.at("/capabilities/drop").toString(), where);
            assertFalse(context.has("privileged") || context.at("/capabilities").has("add"), where);
            // what a read-only root leaves it to write: the pool and the JVM's and JCuda's temporary files
            for (String path : List.of("/dev/shm", "/tmp")) {
                assertTrue(server.get("volumeMounts").findValuesAsText("mountPath").contains(path), where + " mounts " + path);
            }
            String tmp = mountOf(server, "/tmp");
            assertTrue(spec.get("volumes").findParents("name").stream().anyMatch(v -> v.get("name").asText().equals(tmp) && v.has("emptyDir")),
                    where + ": /tmp is an emptyDir");
        }
        JsonNode compose = YAML.readTree(ROOT.resolve("deploy/compose/docker-compose.yml").toFile()).at("/services/lmcache-server");
        assertEquals(uid + ":" + uid, compose.get("user").asText());
        assertTrue(compose.get("read_only").asBoolean());
        assertEquals("[\"/tmp\"]", compose.get("tmpfs").toString());
        assertEquals("[\"ALL\"]", compose.get("cap_drop").toString());
        assertEquals("[\"no-new-privileges:true\"]", compose.get("security_opt").toString());
    }

    @Test
    void theServersRequestCpuRunAtTheKitsPriorityAndVllmIsOnePinnedPairEverywhere() throws Exception {
        JsonNode priority = YAML.readTree(ROOT.resolve("deploy/kubernetes/priority-class.yaml").toFile());
        assertEquals("PriorityClass", priority.get("kind").asText());
        assertTrue(priority.get("value").asInt() > 0 && priority.get("value").asInt() < 1_000_000_000, "above ordinary pods, below system-*-critical");
        assertFalse(priority.get("globalDefault").asBoolean(true));
        JsonNode pod = YAML.readTree(ROOT.resolve("deploy/kubernetes/vllm-with-lmcache.yaml").toFile()).at("/spec");
        List<JsonNode> docs = YAML.readValues(YAML.createParser(ROOT.resolve("deploy/kubernetes/daemonset/lmcache-server.yaml").toFile()),
                JsonNode.class).readAll();
        JsonNode daemonSet = kind(docs, "DaemonSet").at("/spec/template/spec");
        for (JsonNode[] specAndServer : List.of(new JsonNode[] {pod, pod.at("/initContainers/0")},
                new JsonNode[] {daemonSet, daemonSet.at("/containers/0")})) {
            assertEquals(priority.at("/metadata/name").asText(), specAndServer[0].get("priorityClassName").asText());
            // LMCache's operator requests 4 CPUs for its server
            assertEquals("4", specAndServer[1].at("/resources/requests/cpu").asText(), specAndServer[1].get("name").asText());
        }
        Set<String> vllmImages = new TreeSet<>(List.of(pod.at("/containers/0/image").asText(),
                YAML.readTree(ROOT.resolve("deploy/kubernetes/daemonset/vllm-deployment.yaml").toFile()).at("/spec/template/spec/containers/0/image").asText(),
                YAML.readTree(ROOT.resolve("deploy/compose/docker-compose.yml").toFile()).at("/services/vllm/image").asText()));
        assertEquals(1, vllmImages.size(), "one vLLM + lmcache pair in every kit: " + vllmImages);
        assertTrue(vllmImages.iterator().next().startsWith("lmcache/vllm-openai:v0.5"),
                "LMCache's own image with a 0.5.x client (vllm/vllm-openai's may bundle a 0.3.x client): " + vllmImages);
    }

    @Test
    void everyImageOfTheDeployKitIsPinnedAndTheServersIsTheDockerfilesVersion() throws Exception {
        String labels = parseDockerfile(ROOT.resolve("Dockerfile")).stream().filter(i -> i.keyword().equals("LABEL")).map(Instruction::args)
                .reduce("", String::concat);
        String version = labels.replaceFirst("(?s).*org\\.opencontainers\\.image\\.version=\"([^\"]+)\".*", "$1");
        assertTrue(Files.readString(ROOT.resolve("pom.xml")).contains("<version>" + version + "</version>"), "the label is the pom's version");
        List<Path> files;
        try (var walk = Files.walk(ROOT.resolve("deploy"))) {
            files = walk.filter(f -> f.toString().matches(".*\\.ya?ml$")).sorted().toList();
        }
        Pattern image = Pattern.compile("(?m)^\\s*(?:-\\s+)?image:\\s*\"?([^\"\\s#]+)");
        List<String> images = new ArrayList<>();
        for (Path file : files) {
            Matcher matcher = image.matcher(Files.readString(file));
            while (matcher.find()) {
                images.add(ROOT.relativize(file) + " " + matcher.group(1));
            }
        }
        assertTrue(images.size() >= 9, "the deploy kit's images: " + images);
        for (String entry : images) {
            String ref = entry.substring(entry.indexOf(' ') + 1);
            String tag = ref.contains(":") ? ref.substring(ref.lastIndexOf(':') + 1) : "";
            assertTrue(!tag.isEmpty() && !tag.equals("latest") && tag.matches("v?\\d+(\\.\\d+)+.*"), "a pinned version tag: " + entry);
            if (ref.startsWith("lmcache-server:")) {
                assertEquals(version, tag, entry + " is the image the Dockerfile labels " + version);
            }
        }
    }

    @Test
    void systemdUnitRaisesMemlockAndRestartsOnFailureButNotAfterSigterm() throws Exception {
        List<String> lines = Files.readAllLines(ROOT.resolve("deploy/systemd/lmcache-server.service"));
        Map<String, String> service = new HashMap<>();
        String section = "";
        for (String line : lines) {
            String text = line.strip();
            if (text.startsWith("[")) {
                section = text;
            } else if (!text.isEmpty() && !text.startsWith("#") && section.equals("[Service]")) {
                service.put(text.substring(0, text.indexOf('=')), text.substring(text.indexOf('=') + 1));
            }
        }
        assertEquals("infinity", service.get("LimitMEMLOCK"));
        assertEquals("143", service.get("SuccessExitStatus"), "SIGTERM's exit is a clean stop");
        assertEquals("on-failure", service.get("Restart"), "exit 3 (the ZeroMQ transport died) is restarted");
        assertTrue(service.get("ExecStart").startsWith("/opt/lmcache-server/bin/lmcache-server "), service.get("ExecStart"));
        assertTrue(lines.contains("[Install]"));
    }

    @Test
    void everyMetricTheDashboardsAndRulesQueryIsOneTheServerExportsOrAListedFeatureGap() throws Exception {
        Set<String> queried = new TreeSet<>();
        Pattern metric = Pattern.compile("lmcache_mp_[a-zA-Z0-9_]+");
        JsonNode dashboard = JSON.readTree(ROOT.resolve("deploy/grafana/lmcache-server-dashboard.json").toFile());
        for (JsonNode panel : dashboard.get("panels")) {
            for (JsonNode target : panel.get("targets")) {
                Matcher matcher = metric.matcher(target.get("expr").asText());
                while (matcher.find()) {
                    queried.add(matcher.group());
                }
            }
        }
        Matcher rules = metric.matcher(Files.readString(ROOT.resolve("deploy/kubernetes/prometheus-rules.yaml")));
        while (rules.find()) {
            queried.add(rules.group());
        }
        JsonNode official = JSON.readTree(ROOT.resolve("deploy/grafana/lmcache-official-dashboard-queries.json").toFile());
        for (JsonNode query : official.get("queries")) {
            if (query.get("status").asText().equals("applicable")) {
                Matcher matcher = metric.matcher(query.get("expr").asText());
                while (matcher.find()) {
                    queried.add(matcher.group());
                }
            }
        }
        assertTrue(queried.size() >= 40, "queried " + queried);
        // names declared at start plus those made by the first event of their kind (DashboardQueriesIT drives those)
        // every name is declared in a catalogue (the L2 tier's too: this server runs without one; DashboardQueriesIT runs with fs_native)
        StringBuilder catalogues = new StringBuilder();
        try (Stream<Path> files = Files.list(ROOT.resolve("server/src/main/java/io/lmcache/server/metrics"))) {
            for (Path catalogue : files.filter(f -> f.getFileName().toString().endsWith("Catalogue.java")).sorted().toList()) {
                catalogues.append(Files.readString(catalogue));
            }
        }
        String sources = catalogues.toString();
        try (ServerProcess server = ServerProcess.start()) {
            String scrape = Http.get(server.httpBase() + "/metrics").body();
            for (String name : queried) {
                String base = name.replaceFirst("_(total|bucket|sum|count)$", "").replaceFirst("_(seconds|chunks)$", "");
                assertTrue(Pattern.compile("(?m)^" + name + "(\\{|\\s)").matcher(scrape).find()
                        || sources.contains("\"lmcache_mp." + base.substring("lmcache_mp_".length())), name + " is exported");
            }
        }
    }

    private static JsonNode kind(List<JsonNode> docs, String kind) {
        return docs.stream().filter(doc -> doc.get("kind").asText().equals(kind)).findFirst()
                .orElseThrow(() -> new AssertionError("no " + kind));
    }

    private static boolean mounts(JsonNode container, String volume, String path) {
        for (JsonNode mount : container.get("volumeMounts")) {
            if (mount.get("name").asText().equals(volume) && mount.get("mountPath").asText().equals(path)) {
                return true;
            }
        }
        return false;
    }

    private static String mountOf(JsonNode container, String path) {
        for (JsonNode mount : container.get("volumeMounts")) {
            if (mount.get("mountPath").asText().equals(path)) {
                return mount.get("name").asText();
            }
        }
        throw new AssertionError(container.get("name") + " mounts nothing at " + path);
    }

    private static String last(List<Instruction> instructions, String keyword) {
        String found = null;
        for (Instruction instruction : instructions) {
            if (instruction.keyword().equals(keyword)) {
                found = instruction.args();
            }
        }
        assertTrue(found != null, "no " + keyword);
        return found;
    }
}
