package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.protocol.testing.Golden;
import io.lmcache.server.testing.PythonClient;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The host-only paths of the GPU host's SGLang test ({@code testclient/gpu/sglang_check.py}, issue 47 item 6), so that a change
 * of the wire, the {@code /status} keys or the counters that the GPU run relies on fails here rather than first on the GPU host:
 * {@code --self-check} compares its frames with the CPU SGLang scenario's bytes; {@code --dry-run-cpu} runs its checks on shm
 * pools against a server the script starts itself with {@code --device host} (the packaged jar, the tests' java).
 */
class SglangGpuScriptIT {
    private static final Path SCRIPT = Golden.repoRoot().resolve("testclient/gpu/sglang_check.py");

    @TempDir
    Path out;

    @Test
    void selfCheckFramesEqualTheCpuScenarios() {
        PythonClient.Result result = PythonClient.exec(List.of(PythonClient.python().toString(), SCRIPT.toString(), "--self-check"), 120);
        System.out.println(result.output());
        assertEquals(0, result.exitCode(), result.output());
        assertTrue(result.output().contains("sglang self-check: ") && result.output().contains(" passed, 0 failed"), result.output());
    }

    @Test
    void dryRunOnShmPoolsPassesAgainstTheRealServer() {
        String java = System.getProperty("lmcache.test.java", Path.of(System.getProperty("java.home"), "bin", "java").toString());
        String jar = System.getProperty("lmcache.server.jar", "server/target/lmcache-server.jar");  // its manifest names lib/*
        PythonClient.Result result = PythonClient.exec(List.of(PythonClient.python().toString(), SCRIPT.toString(), "--dry-run-cpu",
                "--java", java, "--classpath", jar, "--out", out.toString()), 300);
        System.out.println(result.output());
        assertEquals(0, result.exitCode(), result.output());
        assertTrue(result.output().contains(" failed") && result.output().contains("sglang: ")
                && result.output().contains(", 0 failed"), result.output());
    }
}
