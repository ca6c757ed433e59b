package io.lmcache.server.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.lmcache.server.protocol.testing.Golden;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Assumptions;

/**
 * Runs the Python test client (testclient/, which builds requests exactly as LMCache's client
 * does) against a server. It needs the venv that {@code bin/setup-testclient} makes from the
 * local wheel mirror; when that is missing the test says so loudly and is aborted, unless
 * {@code LMCACHE_REQUIRE_PYTHON=1} (as in CI), where it fails.
 */
public final class PythonClient {
    private PythonClient() {}

    public record Result(int exitCode, String output) {}

    public static Path python() {
        String explicit = System.getenv("LMCACHE_TEST_PYTHON");
        Path python = explicit != null ? Path.of(explicit) : Golden.repoRoot().resolve(".venv/bin/python");
        if (!Files.isExecutable(python)) {
            String message = "\n#####################################################################\n"
                    + "# PYTHON TEST CLIENT UNAVAILABLE: " + python + " not found.\n"
                    + "# Run bin/setup-testclient (needs the local wheel mirror: pyzmq, msgspec,\n"
                    + "# numpy, torch). The tests that drive the server like LMCache's own\n"
                    + "# client do NOT run without it.\n"
                    + "#####################################################################";
            System.err.println(message);
            if ("1".equals(System.getenv("LMCACHE_REQUIRE_PYTHON"))) {
                throw new AssertionError(message);
            }
            Assumptions.abort(message);
        }
        return python;
    }

    /** Runs {@code python -m lmcache_testclient run <scenario> --endpoint ... <args>} and returns its exit code and output. */
    public static Result run(String scenario, String endpoint, String... args) {
        List<String> command = new ArrayList<>(List.of(python().toString(), "-m", "lmcache_testclient", "run", scenario,
                "--endpoint", endpoint));
        command.addAll(List.of(args));
        return exec(command, 600);
    }

    /**
     * Runs {@code command} with the test client on its path; a client still running after
     * {@code timeoutSeconds} is killed with its descendants and the test fails with its output so far.
     */
    public static Result exec(List<String> command, long timeoutSeconds) {
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().put("PYTHONPATH", Golden.repoRoot().resolve("testclient").toString());
        builder.environment().put("PYTHONUNBUFFERED", "1");
        Processes.Result result = Processes.run(builder, Duration.ofSeconds(timeoutSeconds));
        return new Result(result.exitCode(), result.stdout());
    }

    /** Runs a scenario and fails with its whole output unless every check passed. */
    public static String assertPasses(String scenario, String endpoint, String... args) {
        Result result = run(scenario, endpoint, args);
        System.out.println(result.output());
        assertEquals(0, result.exitCode(), () -> "scenario " + scenario + " failed:\n" + result.output());
        return result.output();
    }
}
