package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.protocol.testing.Golden;
import io.lmcache.server.testing.PythonClient;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The GPU benchmarks' server start ({@code testclient/gpu/gpu_check.py}'s {@code Server}) against the real server on the host
 * path: what {@code inflight_bench.py --fresh-connect} means by a worker connecting at ready (GET /healthcheck 200, the rest
 * of the pool prefaulted beside its first requests) or once the pool is prepared, so that a change of {@code /healthcheck} or
 * of the {@code /status} preparation keys fails here rather than first in a fresh sweep on the GPU host
 * ({@code testclient/gpu/test_server_wait.py}; JAVA_HOME's java, the packaged jar).
 */
class ServerWaitScriptIT {
    private static final Path SCRIPT = Golden.repoRoot().resolve("testclient/gpu/test_server_wait.py");

    @Test
    void readyAndPreparedWaitForWhatTheySay() {
        PythonClient.Result result = PythonClient.exec(List.of(PythonClient.python().toString(), SCRIPT.toString()), 180);
        System.out.println(result.output());
        assertEquals(0, result.exitCode(), result.output());
        assertTrue(result.output().contains("Ran 3 tests") && result.output().contains("\nOK"), result.output());
    }
}
