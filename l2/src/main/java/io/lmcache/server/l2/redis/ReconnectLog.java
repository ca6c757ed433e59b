package io.lmcache.server.l2.redis;

import io.lettuce.core.event.Event;
import io.lettuce.core.event.connection.ConnectionActivatedEvent;
import io.lettuce.core.event.connection.ReconnectFailedEvent;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.time.Instant;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;

/**
 * Lettuce's reconnect loop, summarised: Lettuce's own loggers are turned down (they log every attempt of every link, with a stack
 * trace), and this logs per node the first failed reconnect, then at most once a minute "unreachable since T, N reconnect
 * attempts", and once when it is reachable again. Fed from Lettuce's event bus (on its I/O or computation threads).
 */
final class ReconnectLog {
    static final long LOG_INTERVAL_NS = TimeUnit.MINUTES.toNanos(1);

    private final Logger log;
    private final String name;
    private final Map<String, Down> down = new ConcurrentHashMap<>();
    private final LongAdder failedAttempts = new LongAdder();

    /** A node some link could not reconnect to: since when, how many attempts, the last cause, when last logged. */
    private static final class Down {
        final Instant since = Instant.now();
        long attempts;
        String lastCause = "";
        long lastLoggedNs;
        boolean logged;
    }

    ReconnectLog(Logger log, String name) {
        this.log = log;
        this.name = name;
    }

    void onEvent(Event event) {
        switch (event) {
            case ReconnectFailedEvent failed -> failed(address(failed.remoteAddress()), FailureLog.describe(failed.getCause()));
            case ConnectionActivatedEvent activated -> reachable(address(activated.remoteAddress()));
            default -> { }
        }
    }

    void failed(String node, String cause) {
        failedAttempts.increment();
        Down state = down.computeIfAbsent(node, n -> new Down());
        long attempts;
        synchronized (state) {
            attempts = ++state.attempts;
            state.lastCause = cause;
            long nowNs = System.nanoTime();
            if (state.logged && nowNs - state.lastLoggedNs < LOG_INTERVAL_NS) {
                return;
            }
            state.logged = true;
            state.lastLoggedNs = nowNs;
        }
        log.warn("{}: node {} unreachable since {}, {} reconnect attempt(s) failed (last: {}); retrying, logged at most once a minute",
                name, node, state.since, attempts, cause);
    }

    void reachable(String node) {
        Down state = down.remove(node);
        if (state != null) {
            synchronized (state) {
                log.info("{}: node {} reachable again after {} failed reconnect attempt(s), unreachable since {}", name, node, state.attempts,
                        state.since);
            }
        }
    }

    /** Failed reconnect attempts since start (every link of every node). */
    long failedAttempts() {
        return failedAttempts.sum();
    }

    /** Per node unreachable now: since when and how many attempts. */
    Map<String, Object> status() {
        Map<String, Object> out = new TreeMap<>();
        down.forEach((node, state) -> {
            synchronized (state) {
                out.put(node, Map.of("since", state.since.toString(), "reconnect_attempts", state.attempts, "last_error", state.lastCause));
            }
        });
        return out;
    }

    /** {@code host:port} as the topology names nodes (the resolved form's {@code localhost/127.0.0.1:p} would not match). */
    static String address(SocketAddress address) {
        if (address instanceof InetSocketAddress inet) {
            return inet.getHostString() + ":" + inet.getPort();
        }
        return String.valueOf(address);
    }
}
