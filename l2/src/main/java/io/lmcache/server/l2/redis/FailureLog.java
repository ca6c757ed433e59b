package io.lmcache.server.l2.redis;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;

/**
 * An adapter's failures: every one counted by reason (for {@code /status}), the last kept, and
 * logged rate-limited (the first of each reason in full, then at most once a minute per reason), so a node that is down for
 * an hour costs a few log lines, not one per request. The first success after failures is logged
 * once, so the log shows when the adapter recovered. Thread-safe.
 */
public final class FailureLog {
    private static final long LOG_INTERVAL_NS = TimeUnit.MINUTES.toNanos(1);

    private final Logger log;
    private final String name;
    private final Map<String, LongAdder> byReason = new ConcurrentHashMap<>();
    /** Per reason: a connect failure logged must not hide the first timeout that follows. */
    private final Map<String, AtomicLong> lastLoggedNs = new ConcurrentHashMap<>();
    private final AtomicLong sinceLastSuccess = new AtomicLong();
    private final AtomicLong lastRecoveryLoggedNs = new AtomicLong(System.nanoTime() - LOG_INTERVAL_NS);
    private volatile String lastError = "";

    public FailureLog(Logger log, String name) {
        this.log = log;
        this.name = name;
    }

    /** {@code count} operations failed for {@code reason} ({@code what} says which, {@code cause} may be null). */
    public void failed(String reason, int count, String what, Throwable cause) {
        byReason.computeIfAbsent(reason, r -> new LongAdder()).add(count);
        sinceLastSuccess.addAndGet(count);
        String message = what + (cause == null ? "" : ": " + describe(cause));
        lastError = reason + ": " + message;
        long nowNs = System.nanoTime();
        AtomicLong last = lastLoggedNs.computeIfAbsent(reason, r -> new AtomicLong(nowNs - 2 * LOG_INTERVAL_NS));
        long lastNs = last.get();
        if (nowNs - lastNs - LOG_INTERVAL_NS > 0 && last.compareAndSet(lastNs, nowNs)) {
            log.warn("{}: {} ({}; failures are counted in /status by reason, logged at most once a minute each)", name, message, reason);
        }
    }

    /**
     * An operation succeeded: the first after failures is logged, at most once a minute (with one node of three down, successes
     * and failures alternate all the time).
     */
    public void succeeded() {
        if (sinceLastSuccess.get() > 0) {
            long nowNs = System.nanoTime();
            long lastNs = lastRecoveryLoggedNs.get();
            if (nowNs - lastNs - LOG_INTERVAL_NS > 0 && lastRecoveryLoggedNs.compareAndSet(lastNs, nowNs)) {
                log.info("{}: requests succeed again ({} failure(s) since this was last logged)", name, sinceLastSuccess.getAndSet(0));
            }
        }
    }

    public long total() {
        return byReason.values().stream().mapToLong(LongAdder::sum).sum();
    }

    public Map<String, Long> byReason() {
        Map<String, Long> out = new TreeMap<>();
        byReason.forEach((reason, count) -> out.put(reason, count.sum()));
        return out;
    }

    public String lastError() {
        return lastError;
    }

    /** The root cause's class and message: Lettuce wraps the interesting part. */
    public static String describe(Throwable error) {
        Throwable root = error;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        return root.getClass().getSimpleName() + (root.getMessage() == null ? "" : " " + root.getMessage());
    }
}
