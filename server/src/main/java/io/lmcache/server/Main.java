package io.lmcache.server;

import io.lmcache.server.config.ConfigLoader;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.config.StartupException;
import io.lmcache.server.agent.NamedThreads;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** {@code lmcache-server}: parse the command line, start the server, stop it on SIGTERM/SIGINT. */
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
        } catch (RuntimeException e) {
            log.error("start-up failed: {}", e.getMessage(), e);
            System.exit(1);
            return;
        }
        // runs on: lmcache-shutdown (the JVM's shutdown hook, on SIGTERM/SIGINT)
        Runtime.getRuntime().addShutdownHook(NamedThreads.thread("lmcache-shutdown", false, server::close));
        server.awaitStopped();
    }
}
