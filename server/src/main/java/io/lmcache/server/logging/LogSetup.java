package io.lmcache.server.logging;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.encoder.JsonEncoder;
import ch.qos.logback.classic.encoder.PatternLayoutEncoder;
import ch.qos.logback.classic.spi.Configurator;
import ch.qos.logback.classic.spi.ConfiguratorRank;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.ConsoleAppender;
import ch.qos.logback.core.encoder.Encoder;
import ch.qos.logback.core.spi.ContextAwareBase;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import org.slf4j.LoggerFactory;

/**
 * Configures logback in code: LMCache's line format {@code [time] LMCache LEVEL: message (logger:thread)}
 * on stderr, or one JSON object a line with {@code LMCACHE_LOG_FORMAT=json} (for log collectors);
 * level from {@code LMCACHE_LOG_LEVEL}. A logback file given with {@code -Dlogback.configurationFile}
 * (through {@code LMCACHE_JAVA_OPTS}) replaces all of this; the log-line counters stay attached.
 */
@ConfiguratorRank(ConfiguratorRank.CUSTOM_HIGH_PRIORITY)
public final class LogSetup extends ContextAwareBase implements Configurator {
    public static final String ENV_LEVEL = "LMCACHE_LOG_LEVEL";
    public static final String ENV_FORMAT = "LMCACHE_LOG_FORMAT";
    /** Logback's own property for a configuration file; when set, that file configures the appenders. */
    static final String CONFIG_FILE_PROPERTY = "logback.configurationFile";
    /** The server's own loggers: the only names HTTP may set a level for (besides the root). */
    public static final String OWN_PREFIX = "io.lmcache";
    private static final String PATTERN = "[%d{\"yyyy-MM-dd HH:mm:ss,SSS\"}] LMCache %replace(%level){'^WARN$','WARNING'}: %msg \\(%logger{0}:%thread\\)%n%ex";

    @Override
    public ExecutionStatus configure(LoggerContext context) {
        Logger root = context.getLogger(Logger.ROOT_LOGGER_NAME);
        root.detachAndStopAllAppenders();
        boolean ownFile = System.getProperty(CONFIG_FILE_PROPERTY) != null;
        if (!ownFile) {
            ConsoleAppender<ILoggingEvent> console = new ConsoleAppender<>();
            console.setContext(context);
            console.setName("stderr");
            console.setTarget("System.err");
            console.setEncoder(encoder(context, System.getenv(ENV_FORMAT)));
            console.start();
            root.addAppender(console);
        }
        LogCounters.CountingAppender counting = new LogCounters.CountingAppender();
        counting.setContext(context);
        counting.setName("counters");
        counting.start();
        root.addAppender(counting);
        root.setLevel(levelFromEnv(System.getenv(ENV_LEVEL)));
        // chatty third-party internals stay at WARN unless asked for explicitly
        context.getLogger("org.zeromq").setLevel(Level.WARN);
        context.getLogger("zmq").setLevel(Level.WARN);
        // the Redis client and its network layer: an unreachable cluster makes them log every reconnect attempt, each with a
        // stack trace (about 19 500 lines a minute); the adapter logs one rate-limited summary line per failure kind instead
        context.getLogger("io.lettuce").setLevel(Level.ERROR);
        context.getLogger("io.netty").setLevel(Level.ERROR);
        context.getLogger("reactor").setLevel(Level.ERROR);
        // the operator's file (read by logback's next configurator) adds its appenders to these
        return ownFile ? ExecutionStatus.INVOKE_NEXT_IF_ANY : ExecutionStatus.DO_NOT_INVOKE_NEXT_IF_ANY;
    }

    /** LMCache's line format, or JSON lines ({@code LMCACHE_LOG_FORMAT=json}: time, level, thread, logger, message, stack). */
    static Encoder<ILoggingEvent> encoder(LoggerContext context, String format) {
        if (format != null && format.strip().equalsIgnoreCase("json")) {
            JsonEncoder json = new JsonEncoder();
            json.setContext(context);
            json.setWithSequenceNumber(false);
            json.setWithNanoseconds(false);
            json.setWithContext(false);
            json.setWithMessage(false);
            json.setWithArguments(false);
            json.setWithFormattedMessage(true);
            json.start();
            return json;
        }
        PatternLayoutEncoder pattern = new PatternLayoutEncoder();
        pattern.setContext(context);
        pattern.setPattern(PATTERN);
        pattern.start();
        return pattern;
    }

    /** Python's level names (WARNING, CRITICAL) and logback's; INFO when unset or unknown. */
    public static Level levelFromEnv(String value) {
        if (value == null || value.isBlank()) {
            return Level.INFO;
        }
        return switch (value.strip().toUpperCase(Locale.ROOT)) {
            case "WARNING" -> Level.WARN;
            case "CRITICAL", "FATAL" -> Level.ERROR;
            default -> Level.toLevel(value.strip(), Level.INFO);
        };
    }

    /** Sets one logger's level ({@code name} empty: the root). */
    public static Level setLevel(String name, String value) {
        Level level = levelFromEnv(value);
        LoggerContext context = (LoggerContext) LoggerFactory.getILoggerFactory();
        context.getLogger(isRoot(name) ? Logger.ROOT_LOGGER_NAME : name).setLevel(level);
        return level;
    }

    /**
     * Whether {@link #setLevel} may be asked for {@code name} from outside (HTTP): the root, or a logger of the server's own
     * ({@value #OWN_PREFIX}...) that exists already. Asking never creates one: logback keeps every logger it was ever asked for.
     */
    public static boolean isSettable(String name) {
        if (isRoot(name)) {
            return true;
        }
        LoggerContext context = (LoggerContext) LoggerFactory.getILoggerFactory();
        return (name.equals(OWN_PREFIX) || name.startsWith(OWN_PREFIX + ".")) && context.exists(name) != null;
    }

    private static boolean isRoot(String name) {
        return name == null || name.isEmpty() || name.equalsIgnoreCase(Logger.ROOT_LOGGER_NAME);
    }

    /** Loggers with an explicit level, and theirs. */
    public static Map<String, String> levels() {
        LoggerContext context = (LoggerContext) LoggerFactory.getILoggerFactory();
        Map<String, String> levels = new TreeMap<>();
        for (Logger logger : context.getLoggerList()) {
            if (logger.getLevel() != null) {
                levels.put(logger.getName(), logger.getLevel().toString());
            }
        }
        return levels;
    }

    public static Level rootLevel() {
        LoggerContext context = (LoggerContext) LoggerFactory.getILoggerFactory();
        return context.getLogger(Logger.ROOT_LOGGER_NAME).getLevel();
    }
}
