package io.lmcache.server.it;

import static org.awaitility.Awaitility.await;
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
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The container and deploy kit, checked by parsers (no container engine runs here): the
 * Dockerfile's stages, user, ports, health check and entrypoint; the compose and Kubernetes
 * files; the Grafana dashboard's metric names against a live scrape; and the image's entrypoint
 * command run on the host until its health check passes.
 */
@ExtendWith(ServerLogOnFailure.class)
class DeployKitIT {
    private static final Path ROOT = Golden.repoRoot();
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final YAMLMapper YAML = new YAMLMapper();

    /** One Dockerfile instruction: keyword and arguments (continuations joined, comments dropped). */
    record Instruction(String keyword, String args) {}

    static List<Instruction> parseDockerfile(Path file) throws Exception {
        List<Instruction> instructions = new ArrayList<>();
        StringBuilder pending = new StringBuilder();
        for (String raw : Files.readAllLines(file)) {
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
    void dockerfileIsAMultiStageNonRootImageWithHealthcheckAndEntrypoint() throws Exception {
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
        List<Instruction> runtime = all.subList(stages.getLast(), all.size());
        String user = last(runtime, "USER");
        assertFalse(user.equals("root") || user.equals("0"), "runs as a non-root user, got " + user);
        Set<String> ports = new TreeSet<>(List.of(last(runtime, "EXPOSE").split("\\s+")));
        assertEquals(Set.of("5555", "8080", "9090"), ports);
        assertTrue(last(runtime, "HEALTHCHECK").matches("(?s).*CMD .*http://127\\.0\\.0\\.1:8080/healthcheck.*"));
        assertEquals(List.of("lmcache-server"), JSON.readValue(last(runtime, "ENTRYPOINT"), List.class));
        assertTrue(runtime.stream().anyMatch(i -> i.keyword().equals("COPY") && i.args().startsWith("--from=build ")));
        // every path the build stage copies exists in the repository
        for (Instruction instruction : all.subList(stages.getFirst(), stages.getLast())) {
            if (instruction.keyword().equals("COPY")) {
                String[] parts = instruction.args().split("\\s+");
                for (int p = 0; p < parts.length - 1; p++) {
                    assertTrue(Files.exists(ROOT.resolve(parts[p])), "COPY source " + parts[p] + " exists");
                }
            }
        }
    }

    @Test
    void theImagesEntrypointCommandServesOnTheHost() throws Exception {
        List<Instruction> all = parseDockerfile(ROOT.resolve("Dockerfile"));
        @SuppressWarnings("unchecked")
        List<String> cmd = new ArrayList<>(JSON.readValue(last(all, "CMD"), List.class));
        int port = ServerProcess.freePort();
        int httpPort = ServerProcess.freePort();
        cmd.set(cmd.indexOf("--port") + 1, Integer.toString(port));
        cmd.set(cmd.indexOf("--http-port") + 1, Integer.toString(httpPort));
        cmd.set(cmd.indexOf("--l1-size-gb") + 1, "0.25");
        List<String> command = new ArrayList<>(List.of(ROOT.resolve("bin/lmcache-server").toString()));
        command.addAll(cmd);
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(Files.createTempFile("entrypoint", ".log").toFile());
        builder.environment().put("JAVA_HOME", Path.of(System.getProperty("lmcache.test.java")).getParent().getParent().toString());
        Process process = builder.start();
        try {
            await("the HEALTHCHECK passes").atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200)).until(() -> {
                assertTrue(process.isAlive(), "the entrypoint exited");
                try {
                    return Http.get("http://127.0.0.1:" + httpPort + "/healthcheck").statusCode() == 200;
                } catch (UncheckedIOException e) {
                    return false;
                }
            });
        } finally {
            process.destroy();
            assertTrue(process.waitFor(30, TimeUnit.SECONDS));
        }
    }

    @Test
    void composeRunsVllmWithTheSidecarOnSharedIpcAndGpus() throws Exception {
        JsonNode compose = YAML.readTree(ROOT.resolve("deploy/compose/docker-compose.yml").toFile());
        JsonNode server = compose.get("services").get("lmcache-server");
        JsonNode vllm = compose.get("services").get("vllm");
        assertEquals("host", server.get("ipc").asText());
        assertEquals("host", vllm.get("ipc").asText(), "CUDA IPC needs one IPC namespace");
        assertEquals("gpu", server.at("/deploy/resources/reservations/devices/0/capabilities/0").asText());
        assertEquals("gpu", vllm.at("/deploy/resources/reservations/devices/0/capabilities/0").asText());
        String serverCommand = server.get("command").toString();
        String vllmCommand = vllm.get("command").toString();
        assertTrue(vllmCommand.contains("LMCacheMPConnector"));
        assertTrue(vllmCommand.contains("lmcache.mp.port\\\":5555") && serverCommand.contains("\"5555\""), "the same port on both sides");
        assertEquals("service_healthy", vllm.at("/depends_on/lmcache-server/condition").asText());
    }

    @Test
    void kubernetesPodSharesShmAndIsScraped() throws Exception {
        JsonNode pod = YAML.readTree(ROOT.resolve("deploy/kubernetes/vllm-with-lmcache.yaml").toFile());
        assertEquals("Pod", pod.get("kind").asText());
        JsonNode annotations = pod.at("/metadata/annotations");
        assertEquals("true", annotations.get("prometheus.io/scrape").asText());
        assertEquals("/metrics", annotations.get("prometheus.io/path").asText());
        JsonNode volume = pod.at("/spec/volumes/0");
        assertEquals("Memory", volume.at("/emptyDir/medium").asText());
        List<String> names = new ArrayList<>();
        for (JsonNode container : pod.at("/spec/containers")) {
            names.add(container.get("name").asText());
            boolean shm = false;
            for (JsonNode mount : container.get("volumeMounts")) {
                shm |= mount.get("name").asText().equals(volume.get("name").asText()) && mount.get("mountPath").asText().equals("/dev/shm");
            }
            assertTrue(shm, container.get("name") + " mounts the shared /dev/shm");
            if (container.get("name").asText().equals("lmcache-server")) {
                assertEquals(annotations.get("prometheus.io/port").asText(), container.at("/ports/0/containerPort").asText());
                assertEquals("/healthcheck", container.at("/readinessProbe/httpGet/path").asText());
            }
        }
        assertEquals(List.of("lmcache-server", "vllm"), names);
    }

    @Test
    void everyMetricTheDashboardQueriesIsExported() throws Exception {
        JsonNode dashboard = JSON.readTree(ROOT.resolve("deploy/grafana/lmcache-server-dashboard.json").toFile());
        Set<String> queried = new TreeSet<>();
        Pattern metric = Pattern.compile("lmcache_mp_[a-z0-9_]+");
        for (JsonNode panel : dashboard.get("panels")) {
            for (JsonNode target : panel.get("targets")) {
                Matcher matcher = metric.matcher(target.get("expr").asText());
                while (matcher.find()) {
                    queried.add(matcher.group());
                }
            }
        }
        assertTrue(queried.size() >= 10, "the dashboard queries " + queried);
        try (ServerProcess server = ServerProcess.start()) {
            String scrape = Http.get(server.httpBase() + "/metrics").body();
            for (String name : queried) {
                assertTrue(Pattern.compile("(?m)^" + name + "(\\{|\\s)").matcher(scrape).find(), name + " is exported");
            }
        }
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
