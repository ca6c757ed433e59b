package io.lmcache.server;

import io.lmcache.server.config.ConfigLoader;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.config.StartupException;
import io.lmcache.server.agent.NamedThreads;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code lmcache-server}: parse the command line, start the server, stop it on SIGTERM/SIGINT. Every
 * start-up failure, a bad flag or a resource the server cannot have (a port, the GPU, memory), ends
 * the same way: one line {@code lmcache-server: error: ...} on stderr and exit code 2, no stack trace.
 */
public final class Main {
    private Main() {}

    public static void main(String[] args) throws InterruptedException {
        ConfigLoader.Outcome outcome = ConfigLoader.load(args, System.getenv());
        if (outcome instanceof ConfigLoader.Outcome.Exit(int code, String text)) {
            (code == 0 ? System.out : System.err).print(text);
            System.exit(code);
            return;
        }
        ConfigLoader.Outcome.Run run = (ConfigLoader.Outcome.Run) outcome;
        Logger log = LoggerFactory.getLogger(Main.class);
        run.warnings().forEach(log::warn);
        ServerConfig config = run.config();
        LmcacheServer server;
        try {
            server = LmcacheServer.start(config);
        } catch (StartupException e) {
            System.err.print(ConfigLoader.errorLine(e.getMessage()));
            System.exit(ConfigLoader.EXIT_USAGE);
            return;
        } catch (RuntimeException | Error e) {
            // the failed parts were closed already; what is left to say fits on one line
            System.err.println("lmcache-server: error: start-up failed: " + oneLine(e));
            System.err.flush();
            System.exit(ConfigLoader.EXIT_USAGE);
            return;
        }
        // runs on: lmcache-shutdown (the JVM's shutdown hook, on SIGTERM/SIGINT)
        Runtime.getRuntime().addShutdownHook(NamedThreads.thread("lmcache-shutdown", false, server::close));
        server.awaitStopped();
    }

    /** The failure's message (its first line), or its type when it has none; the causes' messages are in it already. */
    static String oneLine(Throwable failure) {
        String message = failure.getMessage();
        if (message == null || message.isBlank()) {
            Throwable cause = failure.getCause();
            return cause != null && cause != failure ? oneLine(cause) : failure.getClass().getSimpleName();
        }
        return message.strip().lines().findFirst().orElse("").strip();
    }
}
