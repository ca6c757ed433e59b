package io.lmcache.server.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The test support's own promises (issue 51): a server that loses a port it was given by this class to another process is
 * started again on new ones, and the logs of servers whose tests passed do not pile up (they live in target/, and a
 * start that is retried leaves only the last attempt's log).
 */
class ServerProcessIT {
    @Test
    void aTakenPortIsRetriedAFewTimesThenTheStartFailsKeepingOnlyTheLastLog() throws Exception {
        try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            int before = ServerProcess.started().size();
            // the ZeroMQ port is taken for good (a race lost every time); the HTTP port is the class's own choice
            assertThrows(AssertionError.class, () -> ServerProcess.start("--port", Integer.toString(taken.getLocalPort())));
            List<ServerProcess> attempts = ServerProcess.started().subList(before, ServerProcess.started().size());
            assertEquals(3, attempts.size(), "chosen again, a few times");
            assertEquals(3, attempts.stream().map(ServerProcess::httpPort).distinct().count(), "a new HTTP port each time");
            for (ServerProcess attempt : attempts.subList(0, 2)) {
                assertFalse(Files.exists(attempt.logFile()), "a retried attempt's log is gone: " + attempt.logFile());
            }
            ServerProcess last = attempts.get(2);
            assertTrue(last.log().contains("cannot bind"), last.log());
            assertTrue(last.logFile().startsWith(ServerProcess.LOG_DIR), "in target/, not the system's temporary directory");
            last.discardLog();
            assertTrue(Files.exists(last.logFile()), "a failed start's log is kept");
            Files.delete(last.logFile());
        }
    }

    @Test
    void freePortsAreDistinctAndBelowTheEphemeralRange() throws Exception {
        int ephemeralLow = Integer.parseInt(Files.readString(Path.of("/proc/sys/net/ipv4/ip_local_port_range"))
                .strip().split("\\s+")[0]);
        Set<Integer> ports = new HashSet<>();
        for (int i = 0; i < 50; i++) {
            int port = ServerProcess.freePort();
            assertTrue(ports.add(port), "handed out twice: " + port);
            if (ephemeralLow - 20_000 >= 1_000) {
                assertTrue(port >= 20_000 && port < ephemeralLow, port + " is outside [20000, " + ephemeralLow + ")");
            }
        }
    }
}
