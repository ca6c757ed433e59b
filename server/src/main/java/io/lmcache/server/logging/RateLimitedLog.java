package io.lmcache.server.logging;

import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;

/**
 * WARN lines for bad input, at most {@code perSecond} a second: one clear line per bad request
 * under normal conditions, and a count of suppressed lines (not a flood) when a peer sends garbage.
 */
public final class RateLimitedLog {
    private static final long WINDOW_NS = TimeUnit.SECONDS.toNanos(1);

    private final Logger log;
    private final int perSecond;
    private long windowStartNs = System.nanoTime();
    private int inWindow;
    private long suppressed;

    public RateLimitedLog(Logger log, int perSecond) {
        this.log = log;
        this.perSecond = perSecond;
    }

    public synchronized void warn(String format, Object... args) {
        long nowNs = System.nanoTime();
        if (nowNs - windowStartNs >= WINDOW_NS) {
            if (suppressed > 0) {
                log.warn("{} similar warning(s) suppressed in the last second", suppressed);
            }
            windowStartNs = nowNs;
            inWindow = 0;
            suppressed = 0;
        }
        if (inWindow < perSecond) {
            inWindow++;
            log.warn(format, args);
        } else {
            suppressed++;
            LogCounters.suppressed().increment();
        }
    }
}
