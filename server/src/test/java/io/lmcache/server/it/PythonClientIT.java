package io.lmcache.server.it;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.testing.PythonClient;
import io.lmcache.server.testing.ServerLogOnFailure;
import io.lmcache.server.testing.ServerProcess;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The Python client that speaks exactly like LMCache's, against the real server. */
@ExtendWith(ServerLogOnFailure.class)
class PythonClientIT {

    @Test
    void selftestReproducesEveryGoldenClientFrame() {
        PythonClient.Result result = PythonClient.exec(List.of(PythonClient.python().toString(), "-m", "lmcache_testclient", "selftest"), 300);
        assertEquals(0, result.exitCode(), result.output());
        assertTrue(result.output().contains(" 0 failed"), result.output());
    }

    @Test
    void handshake() {
        try (ServerProcess server = ServerProcess.start()) {
            PythonClient.assertPasses("handshake", server.endpoint());
        }
    }
}
