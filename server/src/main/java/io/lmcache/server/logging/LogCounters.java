package io.lmcache.server.logging;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.AppenderBase;
import java.util.concurrent.atomic.LongAdder;

/**
 * How much the log said, as counters ({@code lmcache_mp_log_lines_total{level}}, and the lines a
 * rate limit held back): tests and dashboards read these instead of the log's text. Static because
 * logback configures itself before any server object exists; one server runs per process.
 */
public final class LogCounters {
    private static final LongAdder WARNINGS = new LongAdder();
    private static final LongAdder ERRORS = new LongAdder();
    private static final LongAdder SUPPRESSED = new LongAdder();

    private LogCounters() {}

    /** WARN lines written. */
    public static LongAdder warnings() {
        return WARNINGS;
    }

    /** ERROR lines written. */
    public static LongAdder errors() {
        return ERRORS;
    }

    /** Lines a rate limit suppressed instead of writing. */
    public static LongAdder suppressed() {
        return SUPPRESSED;
    }

    /** Zeroes the counts (HTTP /metrics/reset). */
    public static void reset() {
        WARNINGS.reset();
        ERRORS.reset();
        SUPPRESSED.reset();
    }

    /** Attached to the root logger: sees exactly the events that pass the level filter, i.e. the lines written. */
    static final class CountingAppender extends AppenderBase<ILoggingEvent> {
        @Override
        protected void append(ILoggingEvent event) {
            if (event.getLevel() == Level.ERROR) {
                ERRORS.increment();
            } else if (event.getLevel() == Level.WARN) {
                WARNINGS.increment();
            }
        }
    }
}
