package io.lmcache.server.testing;

import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * When a test fails, prints the log of every server it could have talked to (those running when it
 * started and those it started, even if already stopped) and keeps their log files (in target/server-logs);
 * after each test, stops the servers the test itself started (servers a class shares across its tests stay up)
 * and deletes their logs unless a failure kept them.
 */
public final class ServerLogOnFailure implements BeforeEachCallback, AfterEachCallback {
    private static final ExtensionContext.Namespace NAMESPACE = ExtensionContext.Namespace.create(ServerLogOnFailure.class);

    @Override
    public void beforeEach(ExtensionContext context) {
        context.getStore(NAMESPACE).put("live", Set.copyOf(ServerProcess.live()));
        context.getStore(NAMESPACE).put("started", ServerProcess.started().size());
    }

    @Override
    public void afterEach(ExtensionContext context) {
        @SuppressWarnings("unchecked")
        Set<ServerProcess> liveBefore = context.getStore(NAMESPACE).get("live", Set.class);
        int startedBefore = context.getStore(NAMESPACE).get("started", Integer.class);
        List<ServerProcess> started = ServerProcess.started();
        List<ServerProcess> ours = started.subList(Math.min(startedBefore, started.size()), started.size());
        if (context.getExecutionException().isPresent()) {
            Set<ServerProcess> relevant = new LinkedHashSet<>(liveBefore);
            relevant.addAll(ours);
            for (ServerProcess server : relevant) {
                server.keepLog();
                ServerExtension.printLog(server);
            }
        }
        for (ServerProcess server : ours) {
            server.close();
            server.discardLog();
        }
    }
}
