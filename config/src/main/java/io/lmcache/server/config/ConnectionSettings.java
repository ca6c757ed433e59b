package io.lmcache.server.config;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * How many ZeroMQ connections the server holds and how long one may go without a complete message.
 *
 * <p>Without a cap, about 19 900 idle connections used up a limit of 20 000 descriptors: new
 * connections and HTTP timed out. The default cap leaves a reserve of the descriptor limit (the
 * soft {@code RLIMIT_NOFILE}, as {@code /proc/self/limits} shows it; the JVM raises it to the hard
 * limit at start) for HTTP, L2 connections, pool files and the JVM's own: a quarter of it, at least
 * {@link #MIN_RESERVE}.
 *
 * @param maxConnections ZeroMQ TCP connections open at once; one over it is closed as it is accepted
 * @param stallTimeoutNs a connection that completes no message (a request or the answer to the
 *     server's ZeroMQ heartbeat) for this long is closed: a peer stalled mid-frame or silent
 * @param openFileLimit the descriptor limit seen at start, -1 if unknown
 */
public record ConnectionSettings(int maxConnections, long stallTimeoutNs, long openFileLimit) {
    static final int MIN_RESERVE = 256;
    static final int MIN_CONNECTIONS = 16;
    /** Where the limit cannot be read (not Linux). */
    static final int UNKNOWN_LIMIT_DEFAULT = 4096;
    public static final int DEFAULT_STALL_TIMEOUT_SECONDS = 30;

    /** The defaults for a process with {@code openFileLimit} descriptors (tests). */
    public static ConnectionSettings defaults(long openFileLimit) {
        return new ConnectionSettings(defaultCap(openFileLimit), TimeUnit.SECONDS.toNanos(DEFAULT_STALL_TIMEOUT_SECONDS), openFileLimit);
    }

    /** {@code maxConnections} null: the default from the limit. */
    static ConnectionSettings of(Integer maxConnections, int stallTimeoutSeconds, long openFileLimit, List<String> warnings) {
        int cap = maxConnections == null ? defaultCap(openFileLimit) : maxConnections;
        if (maxConnections != null && openFileLimit > 0 && cap > openFileLimit - MIN_RESERVE) {
            warnings.add("--max-connections " + cap + " leaves fewer than " + MIN_RESERVE + " of the " + openFileLimit
                    + " descriptors (ulimit -n) for HTTP, L2 and the pool: at the cap, new connections and HTTP may find none");
        }
        return new ConnectionSettings(cap, TimeUnit.SECONDS.toNanos(stallTimeoutSeconds), openFileLimit);
    }

    static int defaultCap(long openFileLimit) {
        if (openFileLimit <= 0) {
            return UNKNOWN_LIMIT_DEFAULT;
        }
        long reserve = Math.max(MIN_RESERVE, openFileLimit / 4);
        return (int) Math.clamp(openFileLimit - reserve, MIN_CONNECTIONS, 1 << 24);
    }

    /** The soft limit on open files from {@code /proc/self/limits}; -1 if it cannot be read or is unlimited. */
    public static long readOpenFileLimit() {
        try {
            return parseOpenFileLimit(Files.readAllLines(Path.of("/proc/self/limits")));
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    /** "Max open files            20000                20000                files": the first number is the soft limit. */
    static long parseOpenFileLimit(List<String> lines) {
        for (String line : lines) {
            if (line.startsWith("Max open files")) {
                String[] fields = line.substring("Max open files".length()).trim().split("\\s+");
                return fields.length > 0 && fields[0].matches("\\d{1,18}") ? Long.parseLong(fields[0]) : -1;
            }
        }
        return -1;
    }
}
