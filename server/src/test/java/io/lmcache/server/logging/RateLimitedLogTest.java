package io.lmcache.server.logging;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/** The limiter counts lines (events and their levels), never their wording. */
class RateLimitedLogTest {
    private static final long WINDOW_NS = TimeUnit.SECONDS.toNanos(10);

    private static ListAppender<ILoggingEvent> capture(String name) {
        Logger logger = (Logger) LoggerFactory.getLogger(name);
        logger.setLevel(Level.INFO);
        logger.setAdditive(false);
        ListAppender<ILoggingEvent> appender = new ListAppender<>();
        appender.start();
        logger.addAppender(appender);
        return appender;
    }

    @Test
    void aFloodWritesTheBudgetThenOneSummaryPerWindow() {
        ListAppender<ILoggingEvent> lines = capture("test.ratelimit.flood");
        AtomicLong nowNs = new AtomicLong();
        RateLimitedLog log = new RateLimitedLog(LoggerFactory.getLogger("test.ratelimit.flood"), "flood", 5, WINDOW_NS, nowNs::get);
        long suppressedBefore = LogCounters.suppressed().sum();
        for (int i = 0; i < 1000; i++) {
            log.warn("bad request {}", i);
        }
        assertEquals(5, lines.list.size(), "the budget of the window");
        assertEquals(995, log.suppressedInWindow());
        assertTrue(LogCounters.suppressed().sum() - suppressedBefore >= 995, "held-back lines are counted");
        log.flushIfDue();
        assertEquals(5, lines.list.size(), "no summary before the window ends");
        nowNs.addAndGet(WINDOW_NS);
        log.flushIfDue();
        assertEquals(6, lines.list.size(), "one summary line when the window ends, also when the flood stopped");
        assertEquals(Level.WARN, lines.list.get(5).getLevel());
        assertEquals(995L, lines.list.get(5).getArgumentArray()[0], "the summary carries the count");
        log.flushIfDue();
        nowNs.addAndGet(WINDOW_NS);
        log.flushIfDue();
        assertEquals(6, lines.list.size(), "a quiet window writes nothing");
        log.error("again");
        assertEquals(7, lines.list.size(), "a new window has its budget again");
    }

    @Test
    void shutdownFlushesTheSummaryOfAnUnfinishedWindow() {
        ListAppender<ILoggingEvent> lines = capture("test.ratelimit.shutdown");
        RateLimitedLog log = new RateLimitedLog(LoggerFactory.getLogger("test.ratelimit.shutdown"), "shutdown", 2, WINDOW_NS, () -> 0L);
        for (int i = 0; i < 10; i++) {
            log.warn("flood");
        }
        RateLimitedLog.flushAll();
        assertEquals(2, lines.list.size(), "the window is not over");
        RateLimitedLog.flushPending();
        assertEquals(3, lines.list.size(), "the last flood's count is written at shutdown");
        RateLimitedLog.flushPending();
        assertEquals(3, lines.list.size(), "once");
    }

    @Test
    void summariesTakeTheHighestLevelHeldBack() {
        ListAppender<ILoggingEvent> lines = capture("test.ratelimit.levels");
        AtomicLong nowNs = new AtomicLong();
        RateLimitedLog log = new RateLimitedLog(LoggerFactory.getLogger("test.ratelimit.levels"), "levels", 1, WINDOW_NS, nowNs::get);
        log.info("first");
        log.info("held");
        log.error("held", new IllegalStateException("boom"));
        nowNs.addAndGet(WINDOW_NS);
        log.info("next window");
        assertEquals(3, lines.list.size());
        assertEquals(Level.ERROR, lines.list.get(1).getLevel(), "the summary of a window that held an ERROR back");
    }

    @Test
    void categoriesHaveTheirOwnBudgets() {
        ListAppender<ILoggingEvent> lines = capture("test.ratelimit.families");
        RateLimitedLogs family = new RateLimitedLogs(LoggerFactory.getLogger("test.ratelimit.families"), "failures", 3);
        for (int i = 0; i < 100; i++) {
            family.of("unknown_instance").warn("flood {}", i);
        }
        family.of("copy_failed").warn("a different problem");
        assertEquals(4, lines.list.size(), "the flood of one reason does not use up another's budget");
        for (int i = 0; i < 200; i++) {
            family.of("reason" + i).warn("many reasons");
        }
        assertTrue(lines.list.size() <= 4 + 64 * 3, "at most 64 limiters: " + lines.list.size());
    }

    @Test
    void wireTextIsClippedAndControlCharactersReplaced() {
        assertEquals("abc", LogText.clip("abc"));
        String clipped = LogText.clip("x".repeat(1000));
        assertTrue(clipped.length() < 100, clipped);
        assertTrue(clipped.endsWith("(1000 chars)"), clipped);
        assertEquals("a?b?c", LogText.clip("a\nb\rc"));
        assertEquals("null", LogText.clip(null));
        String hex = LogText.hex(new byte[255]);
        assertTrue(hex.startsWith("00".repeat(32)), hex);
        assertTrue(hex.endsWith("(255 bytes)"), hex);
        assertEquals("0aff", LogText.hex(new byte[] {10, -1}));
    }
}
