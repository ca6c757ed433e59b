package io.lmcache.server.loop;

import io.lmcache.server.agent.FatalErrors;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.metrics.ZeromqCatalogue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What ends the ZeroMQ side for good: a JeroMQ I/O thread that dies (an {@link Error} escaped its
 * poller; the ROUTER then never answers again) or a request loop that failed. Either is counted,
 * reported by the health check, and told once to the death listener, which stops the server and
 * exits non-zero so that a restart policy brings back a sidecar that serves. Exceptions an I/O
 * thread survives are only counted and logged (rate-limited). Any thread.
 */
final class TransportDeaths {
    private static final Logger LOG = LoggerFactory.getLogger(TransportDeaths.class);

    private final LongAdder ioThreadDeaths;
    private final LongAdder ioErrors;
    private final RateLimitedLog ioErrorLog = new RateLimitedLog(LOG, 1);
    private final AtomicBoolean reported = new AtomicBoolean();
    /** Why a JeroMQ I/O thread died; null while none has. */
    private volatile String ioThreadDeath;
    private volatile Consumer<String> listener;

    TransportDeaths(ServerMetrics metrics) {
        ioThreadDeaths = metrics.declare(ZeromqCatalogue.IO_THREAD_DEATHS);
        ioErrors = metrics.declare(ZeromqCatalogue.IO_ERRORS);
    }

    void onDeath(Consumer<String> deathListener) {
        listener = deathListener;
    }

    /** Runs on: the dying JeroMQ I/O thread (the context's uncaught-exception handler). */
    void ioThreadDied(Thread thread, Throwable error) {
        // out of memory: what follows allocates (the reason, a log line, the thread that stops the server), and an error
        // thrown from this handler would leave the server wedged; the last resort allocates nothing and exits 3 as well
        FatalErrors.haltIfFatal(error);
        try {
            ioThreadDeaths.increment();
            ioThreadDeath = "zeromq: I/O thread died: " + thread.getName() + ": " + error;
            LOG.error("ZeroMQ I/O thread {} died ({}): the ROUTER serves no more requests; the server stops", thread.getName(),
                    error.toString());
            died(ioThreadDeath);
        } catch (Throwable handlerFailure) {
            FatalErrors.halt();
        }
    }

    /** Runs on: a JeroMQ I/O thread that carries on (the context's notification handler). */
    void ioThreadError(Thread thread, Throwable error) {
        ioErrors.increment();
        ioErrorLog.warn("ZeroMQ I/O thread {}: {}", thread.getName(), error.toString());
    }

    /** The first death is told to the listener; later ones only add to the counters. */
    void died(String why) {
        Consumer<String> deathListener = listener;
        if (deathListener != null && reported.compareAndSet(false, true)) {
            deathListener.accept(why);
        }
    }

    /** Null while every I/O thread lives; else the health check's reason. */
    String ioThreadDeath() {
        return ioThreadDeath;
    }
}
