package io.lmcache.server;

import io.lmcache.server.config.ConfigLoader;
import io.lmcache.server.config.ServerConfig;
import io.lmcache.server.config.StartupException;
import io.lmcache.server.agent.FatalErrors;
import io.lmcache.server.agent.NamedThreads;
import io.lmcache.server.http.AotCacheStatus;
import io.lmcache.server.logging.LogText;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.slf4j.LoggerFactory;

/**
 * {@code lmcache-server}: parse the command line, start the server, stop it on SIGTERM/SIGINT. Every
 * start-up failure, a bad flag or a resource the server cannot have (a port, the GPU, memory), ends
 * the same way: one line {@code lmcache-server: error: ...} on stderr and exit code 2, no stack trace.
 */
public final class Main {
    /** The exit code when the ZeroMQ side died while serving (start-up failures exit 2). */
    public static final int EXIT_TRANSPORT_DIED = 3;
    /** The launcher's notice for this start (bin/lmcache-server sets it; it is not an operator's setting). */
    static final String LAUNCHER_NOTICE_ENV = "LMCACHE_LAUNCHER_NOTICE";
    private static final long FAILURE_CLOSE_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(15);

    private Main() {}

    public static void main(String[] args) throws InterruptedException {
        ConfigLoader.Outcome outcome = ConfigLoader.load(args, System.getenv());
        if (outcome instanceof ConfigLoader.Outcome.Exit(int code, String text)) {
            // an error line quotes the operator's input: bounded, whatever was given (help and version print whole)
            (code == 0 ? System.out : System.err).print(code == 0 ? text : LogText.clip(text.strip(), LogText.MAX_LINE_CHARS)
                    + System.lineSeparator());
            System.exit(code);
            return;
        }
        ConfigLoader.Outcome.Run run = (ConfigLoader.Outcome.Run) outcome;
        ServerConfig config = run.config();
        // a thread that dies of an error it had no handler for: out of memory ends the process (FatalErrors), the rest is logged
        Thread.setDefaultUncaughtExceptionHandler(FatalErrors.defaultHandler((thread, failure) ->
                LoggerFactory.getLogger(Main.class).error("thread {} died: {}", thread.getName(), failure.toString(), failure)));
        LmcacheServer server;
        try {
            server = LmcacheServer.start(config, startupNotices(run.warnings(), System.getenv(LAUNCHER_NOTICE_ENV),
                    AotCacheStatus.thisJvm().refusal()));
        } catch (StartupException e) {
            System.err.print(ConfigLoader.errorLine(LogText.clip(e.getMessage(), LogText.MAX_LINE_CHARS)));
            System.exit(ConfigLoader.EXIT_USAGE);
            return;
        } catch (RuntimeException | Error e) {
            // the failed parts were closed already; what is left to say fits on one line
            System.err.println("lmcache-server: error: start-up failed: " + LogText.oneLine(e));
            System.err.flush();
            System.exit(ConfigLoader.EXIT_USAGE);
            return;
        }
        // runs on: the dying JeroMQ I/O thread or request loop, which hands the stop to a thread of its own (not a daemon:
        // the JVM waits for its exit code even once main has returned)
        server.onTransportDeath(why -> NamedThreads.thread("lmcache-stop-on-failure", false, () -> exitAfterTransportDeath(server)).start());
        // runs on: lmcache-shutdown (the JVM's shutdown hook, on SIGTERM/SIGINT)
        Runtime.getRuntime().addShutdownHook(NamedThreads.thread("lmcache-shutdown", false, server::close));
        server.awaitStopped();
    }

    /**
     * A sidecar that can no longer serve exits non-zero, so a restart policy (systemd, Kubernetes) starts a
     * fresh one rather than leaving a process that only answers HTTP. The close is bounded: a ZeroMQ context
     * whose I/O thread died may not terminate, and the exit must not wait for it.
     */
    private static void exitAfterTransportDeath(LmcacheServer server) {
        System.err.println("lmcache-server: error: the ZeroMQ transport died; stopping (exit " + EXIT_TRANSPORT_DIED + ")");
        Thread closer = NamedThreads.thread("lmcache-shutdown-on-failure", true, server::close);
        closer.start();
        NamedThreads.join(closer, FAILURE_CLOSE_TIMEOUT_NS);
        System.err.flush();
        // halt, not exit: the shutdown hook would wait on a close that may still be running
        Runtime.getRuntime().halt(EXIT_TRANSPORT_DIED);
    }

    /**
     * The configuration's warnings, then what the launcher had to say about this start (a stale ahead-of-time cache it
     * removed) and a cache the JVM refused: logged through the server's logger, so they come in the configured format (JSON
     * lines with LMCACHE_LOG_FORMAT=json), never as plain text ahead of it.
     */
    static List<String> startupNotices(List<String> warnings, String launcherNotice, Optional<String> aotRefusal) {
        List<String> notices = new ArrayList<>(warnings);
        if (launcherNotice != null && !launcherNotice.isBlank()) {
            notices.add(launcherNotice.strip());
        }
        aotRefusal.ifPresent(notices::add);
        return notices;
    }
}
