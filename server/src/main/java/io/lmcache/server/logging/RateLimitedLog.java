package io.lmcache.server.logging;

import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.event.Level;

/**
 * Log lines a remote peer can cause once per message, for one category of them (unknown instance,
 * bad request, failed REGISTER...): at most {@code perWindow} lines a window, then only a count,
 * and at the window's end one "suppressed N similar line(s)" summary, so a flood of bogus requests
 * costs a few lines a second instead of one per message. One limiter per category, so a flood of
 * one kind never hides the first lines of another. Memory is bounded: a limiter is a few fields,
 * and limiters exist per call site (or per fixed reason, see {@link RateLimitedLogs}).
 *
 * <p>The summary of a window is written by the first line of the next window or, when the flood
 * stopped, by {@link #flushAll()}, which housekeeping calls on every tick.
 */
public final class RateLimitedLog {
    private static final long DEFAULT_WINDOW_NS = TimeUnit.SECONDS.toNanos(10);
    /** Every limiter, weakly (a limiter of a closed server goes with it): what {@link #flushAll()} flushes. */
    private static final List<WeakReference<RateLimitedLog>> ALL = new ArrayList<>();

    private final Logger log;
    private final String category;
    private final int perWindow;
    private final long windowNs;
    private final LongSupplier clock;
    private long windowStartNs;
    private int inWindow;
    private long suppressed;
    private Level suppressedLevel = Level.INFO;

    /** {@code perWindow} lines every {@code windowNs}; {@code category} names the lines in the summary. */
    public RateLimitedLog(Logger log, String category, int perWindow, long windowNs) {
        this(log, category, perWindow, windowNs, System::nanoTime);
    }

    /** With the clock given (tests). */
    RateLimitedLog(Logger log, String category, int perWindow, long windowNs, LongSupplier clock) {
        if (perWindow < 1 || windowNs <= 0) {
            throw new IllegalArgumentException("perWindow must be positive and windowNs positive");
        }
        this.log = log;
        this.category = category;
        this.perWindow = perWindow;
        this.windowNs = windowNs;
        this.clock = clock;
        this.windowStartNs = clock.getAsLong();
        register(this);
    }

    /** {@code perWindow} lines every 10 s. */
    public RateLimitedLog(Logger log, String category, int perWindow) {
        this(log, category, perWindow, DEFAULT_WINDOW_NS);
    }

    /** At most {@code perSecond} lines a second (the category is the logger's name). */
    public RateLimitedLog(Logger log, int perSecond) {
        this(log, log.getName(), perSecond, TimeUnit.SECONDS.toNanos(1));
    }

    public void warn(String format, Object... args) {
        emit(Level.WARN, format, args);
    }

    public void error(String format, Object... args) {
        emit(Level.ERROR, format, args);
    }

    public void info(String format, Object... args) {
        emit(Level.INFO, format, args);
    }

    /** Whether a line at {@code level} is written now; when not, it is counted as suppressed. */
    private void emit(Level level, String format, Object... args) {
        if (!log.isEnabledForLevel(level)) {
            return;
        }
        if (admit(level)) {
            write(level, format, args);
        }
    }

    private synchronized boolean admit(Level level) {
        long nowNs = clock.getAsLong();
        if (nowNs - windowStartNs >= windowNs) {
            summarize(nowNs);
        }
        if (inWindow < perWindow) {
            inWindow++;
            return true;
        }
        suppressed++;
        if (level.toInt() > suppressedLevel.toInt()) {
            suppressedLevel = level;
        }
        LogCounters.suppressed().increment();
        return false;
    }

    /** Ends the window if it is over (or {@code now}): writes its summary (if it held lines back) and starts the next. */
    synchronized void flushIfDue(boolean now) {
        long nowNs = clock.getAsLong();
        if (now ? suppressed > 0 : nowNs - windowStartNs >= windowNs) {
            summarize(nowNs);
        }
    }

    synchronized void flushIfDue() {
        flushIfDue(false);
    }

    private void summarize(long nowNs) {
        if (suppressed > 0) {
            write(suppressedLevel, "suppressed {} similar line(s) in the last {} s: {}", suppressed,
                    TimeUnit.NANOSECONDS.toSeconds(nowNs - windowStartNs), category);
        }
        windowStartNs = nowNs;
        inWindow = 0;
        suppressed = 0;
        suppressedLevel = Level.INFO;
    }

    /** The classic calls, so a trailing Throwable is logged with its stack trace as usual. */
    private void write(Level level, String format, Object... args) {
        switch (level) {
            case ERROR -> log.error(format, args);
            case WARN -> log.warn(format, args);
            default -> log.info(format, args);
        }
    }

    /** Lines held back in the current window (tests). */
    public synchronized long suppressedInWindow() {
        return suppressed;
    }

    private static void register(RateLimitedLog limiter) {
        synchronized (ALL) {
            ALL.removeIf(ref -> ref.get() == null);
            ALL.add(new WeakReference<>(limiter));
        }
    }

    /** Writes the summary of every window that is over (housekeeping, each tick; runs on: lmcache-housekeeping). */
    public static void flushAll() {
        flush(false);
    }

    /** Writes the summary of every window that held lines back, over or not (shutdown: the last flood is not lost). */
    public static void flushPending() {
        flush(true);
    }

    private static void flush(boolean now) {
        List<RateLimitedLog> live = new ArrayList<>();
        synchronized (ALL) {
            for (WeakReference<RateLimitedLog> ref : ALL) {
                RateLimitedLog limiter = ref.get();
                if (limiter != null) {
                    live.add(limiter);
                }
            }
        }
        for (RateLimitedLog limiter : live) {
            limiter.flushIfDue(now);
        }
    }
}
