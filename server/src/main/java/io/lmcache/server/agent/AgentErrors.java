package io.lmcache.server.agent;

import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.metrics.ServerCatalogue;
import io.lmcache.server.metrics.ServerMetrics;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The error handler every runner and composite shares: a failed agent turn is counted under the
 * agent's role and logged (at most a few lines a second, so an agent failing every turn cannot
 * flood the log), and the agent keeps running. Metrics export {@link #count(String)} per role. An error of the JVM (out of
 * memory, also direct memory, which Java code throws and {@code -XX:+ExitOnOutOfMemoryError} does not see; a stack overflow)
 * ends the process through {@link FatalErrors}, as in any other thread. Any other {@link Error} (a linkage failure) is
 * remembered: the agent goes on, but what it was changing may be half done, so the health check reports the server unhealthy
 * ({@link #fatalReason()}).
 */
public final class AgentErrors {
    private static final Logger LOG = LoggerFactory.getLogger(AgentErrors.class);

    private final ConcurrentHashMap<String, LongAdder> byRole = new ConcurrentHashMap<>();
    private final RateLimitedLog log = new RateLimitedLog(LOG, 5);
    private final FatalErrors.Halter halter;
    /** The first Error an agent hit, as the health check says it; null while none did. */
    private volatile String fatal;

    public AgentErrors() {
        this(FatalErrors.RUNTIME);
    }

    /** Tests give a halter that records the exit instead of ending the JVM. */
    AgentErrors(FatalErrors.Halter halter) {
        this.halter = halter;
    }

    /** Any agent thread: counts and logs one failure; never throws. */
    public void record(String role, Throwable failure) {
        if (FatalErrors.haltIfFatal(failure, halter)) {
            return; // a test's halter: the real one does not return
        }
        byRole.computeIfAbsent(role, r -> new LongAdder()).increment();
        if (failure instanceof Error && fatal == null) {
            // two agents failing at once may both set it: either reason is true
            fatal = "agent " + role + " hit " + LogText.clip(failure.toString());
        }
        log.warn("agent {} failed ({}); it keeps running", role, failure.toString(), failure);
    }

    /** Null while no agent hit an {@link Error}; else which agent and what (the first one). Any thread. */
    public String fatalReason() {
        return fatal;
    }

    public long count(String role) {
        LongAdder adder = byRole.get(role);
        return adder == null ? 0 : adder.sum();
    }

    /** Failed turns of the background agents (each keeps running), by role. */
    public void bindMeters(ServerMetrics metrics, List<String> roles) {
        for (String role : roles) {
            // runs on: lmcache-http-* (each scrape)
            metrics.functionCounter(ServerCatalogue.AGENT_ERRORS, this, e -> e.count(role), role);
        }
    }

}
