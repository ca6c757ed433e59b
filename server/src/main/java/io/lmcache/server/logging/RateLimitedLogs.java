package io.lmcache.server.logging;

import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;

/**
 * One {@link RateLimitedLog} per reason of a family of lines (the transfer failures by reason, say),
 * so a flood of one reason keeps its own budget. Reasons come from code, not the wire; still the
 * number of limiters is capped, and reasons past the cap share one.
 */
public final class RateLimitedLogs {
    private static final int MAX_REASONS = 64;
    private static final String OTHER = "other";

    private final Logger log;
    private final String family;
    private final int perWindow;
    private final ConcurrentHashMap<String, RateLimitedLog> byReason = new ConcurrentHashMap<>();

    public RateLimitedLogs(Logger log, String family, int perWindow) {
        this.log = log;
        this.family = family;
        this.perWindow = perWindow;
    }

    /** The limiter of this reason. */
    public RateLimitedLog of(String reason) {
        RateLimitedLog limiter = byReason.get(reason);
        if (limiter != null) {
            return limiter;
        }
        String key = byReason.size() < MAX_REASONS ? reason : OTHER;
        return byReason.computeIfAbsent(key, k -> new RateLimitedLog(log, family + " (" + k + ")", perWindow));
    }
}
