package io.lmcache.server.testing;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Prints the log of every running server when a test fails, and stops the servers the test
 * itself started (servers a class shares across its tests stay up).
 */
public final class ServerLogOnFailure implements BeforeEachCallback, AfterEachCallback {
    private static final ExtensionContext.Namespace NAMESPACE = ExtensionContext.Namespace.create(ServerLogOnFailure.class);

    @Override
    public void beforeEach(ExtensionContext context) {
        context.getStore(NAMESPACE).put("before", new HashSet<>(ServerProcess.live()));
    }

    @Override
    public void afterEach(ExtensionContext context) {
        @SuppressWarnings("unchecked")
        Set<ServerProcess> before = context.getStore(NAMESPACE).get("before", Set.class);
        List<ServerProcess> live = ServerProcess.live();
        if (context.getExecutionException().isPresent()) {
            for (ServerProcess server : live) {
                System.err.println("===== server log (pid " + server.pid() + ", " + server.logFile() + ") =====");
                System.err.println(server.log());
                System.err.println("===== end of server log =====");
            }
        }
        for (ServerProcess server : live) {
            if (before == null || !before.contains(server)) {
                server.close();
            }
        }
    }
}
