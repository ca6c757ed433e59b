package io.lmcache.server.testing;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * One real server shared by the tests of a class, as Aeron's system tests hold their media
 * driver: started before the first test with the flags given, its log printed when a test (or
 * the start itself) fails, stopped after the last test. Register it on a static field:
 *
 * <pre>{@code
 * @RegisterExtension
 * static final ServerExtension SERVER = ServerExtension.withFlags("--l1-size-gb", "0.5");
 * }</pre>
 *
 * It also does what {@link ServerLogOnFailure} does for servers a test starts itself.
 */
public final class ServerExtension implements BeforeAllCallback, AfterAllCallback, BeforeEachCallback, AfterEachCallback {
    private final Map<String, String> env;
    private final List<String> flags;
    private final ServerLogOnFailure perTest = new ServerLogOnFailure();
    private ServerProcess server;

    private ServerExtension(Map<String, String> env, List<String> flags) {
        this.env = Map.copyOf(env);
        this.flags = List.copyOf(flags);
    }

    /** A server started with these command-line flags (on free ports; see {@link ServerProcess#start}). */
    public static ServerExtension withFlags(String... flags) {
        return new ServerExtension(Map.of(), List.of(flags));
    }

    /** A server started with this environment and these flags. */
    public static ServerExtension withEnv(Map<String, String> env, String... flags) {
        return new ServerExtension(env, List.of(flags));
    }

    @Override
    public void beforeAll(ExtensionContext context) {
        // a port taken under it is chosen again; a start that fails for good prints the log
        server = ServerProcess.start(env, flags.toArray(String[]::new));
    }

    @Override
    public void beforeEach(ExtensionContext context) {
        if (server == null) {
            throw new IllegalStateException("ServerExtension must be registered on a static field (it starts its server before all tests)");
        }
        perTest.beforeEach(context);
    }

    @Override
    public void afterEach(ExtensionContext context) {
        perTest.afterEach(context);
    }

    @Override
    public void afterAll(ExtensionContext context) {
        if (server == null) {
            return;
        }
        if (context.getExecutionException().isPresent()) {
            server.keepLog();
            printLog(server);
        }
        server.close();
        server.discardLog();
        server = null;
    }

    /** The running server. */
    public ServerProcess server() {
        if (server == null) {
            throw new IllegalStateException("the server is not running (outside the test class's lifetime?)");
        }
        return server;
    }

    public String endpoint() {
        return server().endpoint();
    }

    public String httpBase() {
        return server().httpBase();
    }

    static void printLog(ServerProcess server) {
        System.err.println("===== server log (pid " + server.pid() + ", " + server.logFile() + ") =====");
        System.err.println(server.log());
        System.err.println("===== end of server log =====");
    }
}
