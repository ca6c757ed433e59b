package io.lmcache.server.logging;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.encoder.PatternLayoutEncoder;
import ch.qos.logback.classic.spi.Configurator;
import ch.qos.logback.classic.spi.ConfiguratorRank;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.ConsoleAppender;
import ch.qos.logback.core.spi.ContextAwareBase;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import org.slf4j.LoggerFactory;

/**
 * Configures logback in code (no XML, so the runtime needs no java.xml): LMCache's line format
 * {@code [time] LMCache LEVEL: message (logger:thread)} on stderr, level from {@code LMCACHE_LOG_LEVEL}.
 */
@ConfiguratorRank(ConfiguratorRank.CUSTOM_HIGH_PRIORITY)
public final class LogSetup extends ContextAwareBase implements Configurator {
    public static final String ENV_LEVEL = "LMCACHE_LOG_LEVEL";
    private static final String PATTERN = "[%d{\"yyyy-MM-dd HH:mm:ss,SSS\"}] LMCache %replace(%level){'^WARN$','WARNING'}: %msg \\(%logger{0}:%thread\\)%n%ex";

    @Override
    public ExecutionStatus configure(LoggerContext context) {
        PatternLayoutEncoder encoder = new PatternLayoutEncoder();
        encoder.setContext(context);
        encoder.setPattern(PATTERN);
        encoder.start();
        ConsoleAppender<ILoggingEvent> console = new ConsoleAppender<>();
        console.setContext(context);
        console.setName("stderr");
        console.setTarget("System.err");
        console.setEncoder(encoder);
        console.start();
        Logger root = context.getLogger(Logger.ROOT_LOGGER_NAME);
        root.detachAndStopAllAppenders();
        root.addAppender(console);
        LogCounters.CountingAppender counting = new LogCounters.CountingAppender();
        counting.setContext(context);
        counting.setName("counters");
        counting.start();
        root.addAppender(counting);
        root.setLevel(levelFromEnv(System.getenv(ENV_LEVEL)));
        // chatty third-party internals stay at WARN unless asked for explicitly
        context.getLogger("org.zeromq").setLevel(Level.WARN);
        context.getLogger("zmq").setLevel(Level.WARN);
        return ExecutionStatus.DO_NOT_INVOKE_NEXT_IF_ANY;
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
        context.getLogger(name == null || name.isEmpty() ? Logger.ROOT_LOGGER_NAME : name).setLevel(level);
        return level;
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
