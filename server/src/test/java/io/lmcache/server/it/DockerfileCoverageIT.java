package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.it.DeployKitIT.Instruction;
import io.lmcache.server.protocol.testing.Golden;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.UnaryOperator;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Dockerfile copies everything the image needs, with the list derived from the checkout
 * (pom.xml's {@code <modules>}, each module's dependencies, the launchers in bin/ and what they
 * open), not written down a second time: a module added to pom.xml or a launcher that execs a new
 * sibling fails here until the Dockerfile copies it. ContainerImageIT and deploy/container/ci-image-check.sh
 * build and run the image itself; this runs in every {@code mvn verify}, without a container engine.
 */
class DockerfileCoverageIT {
    private static final Path ROOT = Golden.repoRoot();

    private static List<String> dockerfile() throws Exception {
        return Files.readAllLines(ROOT.resolve("Dockerfile"));
    }

    private static List<String> problems(DockerfileCoverage coverage, List<String> dockerfile) throws Exception {
        return coverage.problems(DeployKitIT.parseDockerfile(dockerfile));
    }

    /** The Dockerfile with the lines equal to {@code line} changed (null: dropped; a newline makes two); fails when none matched. */
    private static List<String> edited(String line, UnaryOperator<String> edit) throws Exception {
        List<String> lines = dockerfile();
        List<String> result = lines.stream().map(l -> l.strip().equals(line) ? edit.apply(l) : l).filter(l -> l != null)
                .flatMap(l -> l.lines()).toList();
        assertTrue(!result.equals(lines), "the Dockerfile has the line " + line);
        return result;
    }

    /** The problems name {@code text} first (the Dockerfile's other lines raise none). */
    private static void assertNamed(List<String> problems, String text) {
        assertTrue(!problems.isEmpty() && problems.getFirst().contains(text), "expected " + text + " in " + problems);
    }

    @Test
    void theDockerfileCopiesEveryModuleTheLaunchersAndTheBuiltJar() throws Exception {
        DockerfileCoverage coverage = DockerfileCoverage.of(ROOT);
        assertTrue(coverage.modules().containsAll(List.of("protocol", "config", "l2", "cuda", "server")), "read pom.xml: " + coverage.modules());
        assertTrue(coverage.shippedClosure().containsAll(Set.of("protocol", "config", "l2", "cuda", "server")), "" + coverage.shippedClosure());
        List<Instruction> parsed = DeployKitIT.parseDockerfile(dockerfile());
        Map<String, String> launchers = coverage.launchers(coverage.stages(parsed).getLast().instructions());
        assertEquals(Map.of("/opt/lmcache-server/bin/lmcache-server", "lmcache-server", "/opt/lmcache-server/bin/lmcache", "lmcache",
                "/opt/lmcache-server/bin/lmcache-healthcheck", "lmcache-healthcheck"), launchers, "derived from the image's links and health check");
        assertEquals(Map.of("/opt/lmcache-server/server/target/lmcache-server.jar", "server/target/lmcache-server.jar",
                "/opt/lmcache-server/server/target/lib", "server/target/lib", "/opt/lmcache-server/server/target/lmcache-server.aot",
                "server/target/lmcache-server.aot"), coverage.launcherOutputs(launchers));
        assertEquals(List.of(), coverage.problems(parsed));
    }

    @Test
    void aModuleLeftOutOfTheBuildStageIsNamed() throws Exception {
        DockerfileCoverage coverage = DockerfileCoverage.of(ROOT);
        List<String> noL2 = problems(coverage, edited("COPY l2 l2", l -> null));
        assertEquals(1, noL2.size(), "" + noL2);
        assertNamed(noL2, "module l2 (all of it)");
        assertNamed(problems(coverage, edited("COPY l2/pom.xml l2/", l -> null)), "module l2's pom.xml");
        // bench is not built into the image, but the reactor needs its pom
        assertNamed(problems(coverage, edited("COPY bench/pom.xml bench/", l -> null)), "module bench's pom.xml");
        // a pom copied only after the dependency download does not count
        String pom = "COPY protocol/pom.xml protocol/";
        List<String> late = DeployKitIT.parseDockerfile(edited(pom, l -> null)).stream().map(i -> i.keyword() + " " + i.args())
                .flatMap(l -> l.contains("dependency:go-offline") ? Stream.of(l, pom) : Stream.of(l)).toList();
        assertNamed(problems(coverage, late), "module protocol's pom.xml");
        // into the wrong place: a folder's contents land in the destination
        assertNamed(problems(coverage, edited("COPY cuda cuda", l -> "COPY cuda ./")), "module cuda (all of it)");
    }

    @Test
    void aLauncherOrTheJarLeftOutOfTheRuntimeStageIsNamed() throws Exception {
        DockerfileCoverage coverage = DockerfileCoverage.of(ROOT);
        String launchers = "COPY --from=build /src/bin/lmcache-server /src/bin/lmcache /src/bin/lmcache-healthcheck bin/";
        List<String> noHealthCheck = problems(coverage, edited(launchers, l -> l.replace(" /src/bin/lmcache-healthcheck", "")));
        assertEquals(1, noHealthCheck.size(), "" + noHealthCheck);
        assertNamed(noHealthCheck, "launcher bin/lmcache-healthcheck");
        // bin/lmcache execs $bin/lmcache-server: needed even if nothing in the image named it
        assertNamed(problems(coverage, edited(launchers, l -> l.replace(" /src/bin/lmcache-server", ""))), "launcher bin/lmcache-server");
        assertNamed(problems(coverage, edited("COPY bin bin", l -> null)), "launcher bin/lmcache-server in the build stage");
        assertNamed(problems(coverage, edited("COPY --from=build /src/server/target/lib server/target/lib", l -> null)),
                "server/target/lib where the launcher looks for it");
        // the links point into /opt/lmcache-server/bin: the launchers copied elsewhere leave them dangling
        assertNamed(problems(coverage, edited("WORKDIR /opt/lmcache-server", l -> "WORKDIR /opt/elsewhere")), "launcher bin/lmcache");
    }

    @Test
    void aModuleAddedToThePomFailsUntilTheDockerfileCopiesIt(@TempDir Path repo) throws Exception {
        Files.createDirectories(repo.resolve("bin"));
        for (String file : List.of("lmcache-server", "lmcache", "lmcache-healthcheck")) {
            Files.copy(ROOT.resolve("bin").resolve(file), repo.resolve("bin").resolve(file));
        }
        for (String module : DockerfileCoverage.of(ROOT).modules()) {
            Files.createDirectories(repo.resolve(module));
            Files.copy(ROOT.resolve(module).resolve("pom.xml"), repo.resolve(module).resolve("pom.xml"));
        }
        Files.writeString(repo.resolve("pom.xml"), Files.readString(ROOT.resolve("pom.xml"))
                .replace("<module>server</module>", "<module>server</module>\n    <module>tiers</module>"));
        Files.createDirectories(repo.resolve("tiers"));
        Files.writeString(repo.resolve("tiers/pom.xml"), "<project><artifactId>lmcache-tiers</artifactId></project>");
        // the server depending on the new module: its sources are needed as well as its pom
        Files.writeString(repo.resolve("server/pom.xml"), Files.readString(ROOT.resolve("server/pom.xml")).replaceFirst("<dependencies>",
                "<dependencies>\n    <dependency><groupId>io.lmcache</groupId><artifactId>lmcache-tiers</artifactId></dependency>"));
        List<String> problems = problems(DockerfileCoverage.of(repo), dockerfile());
        assertEquals(2, problems.size(), "" + problems);
        assertTrue(problems.get(0).contains("module tiers's pom.xml") && problems.get(1).contains("module tiers (all of it)"), "" + problems);
    }
}
