package io.lmcache.server.l2.redis;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Function;
import org.slf4j.Logger;

/**
 * A circuit breaker per node (by {@code host:port}): after {@link #OPEN_AFTER_TIMEOUTS} commands in a row time out, the node is
 * open and every key it holds answers at once as a miss (a LOOKUP answers from L1) instead of costing request_timeout each, for as
 * long as the node stays silent. While open, one background probe at a time (a PING bounded by {@link #PROBE_TIMEOUT_NS}) asks it
 * again, first after {@link #BACKOFF_MIN_NS} and then backing off to {@link #BACKOFF_MAX_NS}; the first PONG closes it. A node
 * that is down is refused by the client at once anyway, so only timeouts open a breaker. Thread-safe: every node's state changes
 * under its monitor.
 *
 * <p>The s3 adapter keeps one breaker (its endpoint) with its own {@link Policy}: LMCache's three connection failures in a row,
 * re-armed after {@code s3_breaker_initial_cooldown_s} doubling to {@code s3_breaker_max_cooldown_s}.
 */
public final class NodeBreakers {
    static final int OPEN_AFTER_TIMEOUTS = 2;
    static final long BACKOFF_MIN_NS = TimeUnit.MILLISECONDS.toNanos(250);
    static final long BACKOFF_MAX_NS = TimeUnit.SECONDS.toNanos(10);
    static final long PROBE_TIMEOUT_NS = TimeUnit.MILLISECONDS.toNanos(500);

    /** When a breaker opens and how it backs off: the first probe after {@code backoffMinNs}, doubling up to {@code backoffMaxNs}. */
    public record Policy(int openAfterFailures, long backoffMinNs, long backoffMaxNs, long probeTimeoutNs) {}

    /** Redis and Valkey: {@link #OPEN_AFTER_TIMEOUTS} timeouts, 250 ms to 10 s, a PING of at most 500 ms. */
    static final Policy REDIS = new Policy(OPEN_AFTER_TIMEOUTS, BACKOFF_MIN_NS, BACKOFF_MAX_NS, PROBE_TIMEOUT_NS);

    /** CLOSED: in use. OPEN: refused, a probe is scheduled. PROBING: refused, the one probe is in flight (half-open). */
    public enum State { CLOSED, OPEN, PROBING }

    private final Logger log;
    private final String name;
    private final ScheduledExecutorService scheduler;
    /** Sends the probe for a node: completes with whether it answered, or fails. */
    private final Function<String, CompletableFuture<Boolean>> probe;
    private final Policy policy;
    private final long probeTimeoutNs;
    private final Map<String, Breaker> byNode = new ConcurrentHashMap<>();
    private final LongAdder opened = new LongAdder();
    private final LongAdder refusedKeys = new LongAdder();
    private final LongAdder probes = new LongAdder();
    private final LongAdder probesFailed = new LongAdder();

    NodeBreakers(Logger log, String name, ScheduledExecutorService scheduler, Function<String, CompletableFuture<String>> ping,
            long requestTimeoutNs) {
        this(log, name, scheduler, node -> ping.apply(node).thenApply("PONG"::equalsIgnoreCase), REDIS, requestTimeoutNs);
    }

    /**
     * @param probe asks a node whether it answers (true), when open
     * @param requestTimeoutNs a probe waits at most this (and at most the policy's probe timeout)
     */
    public NodeBreakers(Logger log, String name, ScheduledExecutorService scheduler, Function<String, CompletableFuture<Boolean>> probe,
            Policy policy, long requestTimeoutNs) {
        this.log = log;
        this.name = name;
        this.scheduler = scheduler;
        this.probe = probe;
        this.policy = policy;
        this.probeTimeoutNs = Math.min(policy.probeTimeoutNs(), requestTimeoutNs);
    }

    /** One node's breaker. */
    private final class Breaker {
        private final String node;
        private State state = State.CLOSED;
        private int timeoutsInARow;
        private long openedAtNs;
        private long backoffNs = policy.backoffMinNs();
        private long refused;
        private long timesOpened;

        Breaker(String node) {
            this.node = node;
        }

        synchronized Map<String, Object> status() {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("state", state.name().toLowerCase(Locale.ROOT));
            out.put("timeouts_in_a_row", timeoutsInARow);
            out.put("open_for_ms", state == State.CLOSED ? 0 : TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - openedAtNs));
            out.put("times_opened", timesOpened);
            out.put("refused_keys", refused);
            return out;
        }
    }

    /** Whether a command to {@code node} may be sent now; false (counted) while its breaker is open: answer the key as a miss. */
    public boolean allows(String node) {
        Breaker breaker = byNode.get(node);
        if (breaker == null) {
            return true;
        }
        synchronized (breaker) {
            if (breaker.state == State.CLOSED) {
                return true;
            }
            breaker.refused++;
        }
        refusedKeys.increment();
        return false;
    }

    /** A command to {@code node} answered (a reply of any kind, an error reply too): the node is alive. */
    public void answered(String node) {
        Breaker breaker = byNode.get(node);
        if (breaker != null) {
            synchronized (breaker) {
                breaker.timeoutsInARow = 0;
            }
        }
    }

    /** A command to {@code node} timed out (or, for s3, failed to connect); the policy's nth in a row opens its breaker. */
    public void timedOut(String node) {
        Breaker breaker = byNode.computeIfAbsent(node, Breaker::new);
        synchronized (breaker) {
            if (breaker.state != State.CLOSED || ++breaker.timeoutsInARow < policy.openAfterFailures()) {
                return;
            }
            breaker.state = State.OPEN;
            breaker.openedAtNs = System.nanoTime();
            breaker.backoffNs = policy.backoffMinNs();
            breaker.timesOpened++;
        }
        opened.increment();
        log.warn("{}: node {} did not answer {} requests in a row: its keys are misses at once until a probe answers", name,
                node, policy.openAfterFailures());
        scheduleProbe(breaker, policy.backoffMinNs());
    }

    private void scheduleProbe(Breaker breaker, long delayNs) {
        try {
            scheduler.schedule(() -> probe(breaker), delayNs, TimeUnit.NANOSECONDS);
        } catch (RejectedExecutionException e) {
            // closing: nothing is sent any more
        }
    }

    /** Runs on: the adapter's scheduler. One PING; its answer (on a Lettuce I/O thread or the scheduler) closes or backs off. */
    private void probe(Breaker breaker) {
        synchronized (breaker) {
            if (breaker.state != State.OPEN) {
                return;
            }
            breaker.state = State.PROBING;
        }
        probes.increment();
        CompletableFuture<Boolean> reply;
        try {
            reply = probe.apply(breaker.node);
        } catch (RuntimeException e) {
            reply = CompletableFuture.failedFuture(e);
        }
        reply.orTimeout(probeTimeoutNs, TimeUnit.NANOSECONDS).whenComplete((alive, error) -> probed(breaker, error == null
                && Boolean.TRUE.equals(alive)));
    }

    private void probed(Breaker breaker, boolean alive) {
        long openMs;
        long nextNs;
        synchronized (breaker) {
            if (breaker.state != State.PROBING) {
                return;
            }
            openMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - breaker.openedAtNs);
            if (alive) {
                breaker.state = State.CLOSED;
                breaker.timeoutsInARow = 0;
                nextNs = 0;
            } else {
                breaker.state = State.OPEN;
                breaker.backoffNs = Math.min(policy.backoffMaxNs(), breaker.backoffNs * 2);
                nextNs = breaker.backoffNs;
            }
        }
        if (alive) {
            log.info("{}: node {} answers again after {} ms: its keys are used again", name, breaker.node, openMs);
        } else {
            probesFailed.increment();
            scheduleProbe(breaker, nextNs);
        }
    }

    /** The node's state ({@link State#CLOSED} for a node never seen to time out). */
    public State state(String node) {
        Breaker breaker = byNode.get(node);
        if (breaker == null) {
            return State.CLOSED;
        }
        synchronized (breaker) {
            return breaker.state;
        }
    }

    /** Nodes whose breaker is not closed now. */
    public List<String> openNodes() {
        return byNode.keySet().stream().filter(node -> state(node) != State.CLOSED).sorted().toList();
    }

    /** The counters /status and the metrics show: times opened, keys refused while open, probes sent and failed. */
    public Map<String, Long> counters() {
        Map<String, Long> out = new LinkedHashMap<>();
        out.put("breaker_opened", opened.sum());
        out.put("breaker_refused_keys", refusedKeys.sum());
        out.put("breaker_probes", probes.sum());
        out.put("breaker_probes_failed", probesFailed.sum());
        return out;
    }

    /** Per node that ever timed out: its breaker's state and counters. */
    public Map<String, Object> status() {
        Map<String, Object> out = new TreeMap<>();
        byNode.forEach((node, breaker) -> out.put(node, breaker.status()));
        return out;
    }
}
