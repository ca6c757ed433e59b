package io.lmcache.server.liveness;

import io.lmcache.server.agent.Agent;
import io.lmcache.server.peer.PeerConnections;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The worker reaper, an agent: every {@code timeout / 4} (sooner when the disconnect grace needs
 * it) it asks every target for its stale instances, then has every target drop each reaped id.
 * Dropping only enqueues the instance's native resources on the end-of-life queue: the release
 * thread frees them, so a close that hangs in the driver (LMCache #4676) never stalls a scan. A
 * target that throws is logged and counted, and the others still run.
 */
public final class Reaper implements Agent {
    private static final Logger LOG = LoggerFactory.getLogger(Reaper.class);

    private final List<InstanceLivenessTarget> targets;
    private final long timeoutNs;
    private final long graceNs;
    private final long periodNs;
    private final PeerConnections connections;
    private final ReleaseThread releases;
    private final LongSupplier clockNs;
    private final Map<InstanceLivenessTarget.Reason, LongAdder> reaped = new EnumMap<>(InstanceLivenessTarget.Reason.class);
    private final LongAdder dropFailures = new LongAdder();
    private final LongAdder targetFailures = new LongAdder();
    private final LongAdder scans = new LongAdder();
    private long deadlineNs;

    public Reaper(List<InstanceLivenessTarget> targets, long timeoutNs, long graceNs, long disconnectGraceNs, ReleaseThread releases,
            PeerConnections connections, LongSupplier clockNs) {
        this.targets = List.copyOf(targets);
        this.timeoutNs = timeoutNs;
        this.graceNs = graceNs;
        this.releases = releases;
        this.connections = connections;
        this.clockNs = clockNs;
        long period = timeoutNs / 4;
        if (disconnectGraceNs > 0) {
            period = Math.min(period, disconnectGraceNs / 3);
        }
        this.periodNs = Math.max(TimeUnit.MILLISECONDS.toNanos(50), period);
        this.deadlineNs = clockNs.getAsLong() + periodNs;
        for (InstanceLivenessTarget.Reason reason : InstanceLivenessTarget.Reason.values()) {
            reaped.put(reason, new LongAdder());
        }
    }

    /** Whether reaping is on (a timeout is set and there is something to reap from); when off, {@link #doWork} does nothing. */
    public boolean enabled() {
        return timeoutNs > 0 && !targets.isEmpty();
    }

    public long periodNs() {
        return periodNs;
    }

    @Override
    public String roleName() {
        return "worker-reaper";
    }

    @Override
    public void onStart() {
        if (enabled()) {
            LOG.info("worker reaper: every {} ms; pinged workers reaped after {} s of silence, never-pinged ones after {} s",
                    TimeUnit.NANOSECONDS.toMillis(periodNs), timeoutNs / 1e9, graceNs / 1e9);
        }
    }

    /** Scans when the period has passed; returns the instances reaped plus one for the scan, or 0 when none was due. */
    @Override
    public int doWork() {
        long nowNs = clockNs.getAsLong();
        if (!enabled() || deadlineNs - nowNs >= 0) {
            return 0;
        }
        deadlineNs = nowNs + periodNs;
        return 1 + scan().size();
    }

    /** One pass over every target; returns the instances reaped. */
    public List<InstanceLivenessTarget.Reaped> scan() {
        scans.increment();
        List<InstanceLivenessTarget.Reaped> all = new ArrayList<>();
        for (InstanceLivenessTarget target : targets) {
            try {
                all.addAll(target.reapStaleInstances(timeoutNs, graceNs));
            } catch (RuntimeException e) {
                targetFailures.increment();
                LOG.error("liveness target {} failed while collecting stale instances; the others go on", target.livenessName(), e);
            }
        }
        for (InstanceLivenessTarget.Reaped instance : all) {
            reaped.get(instance.reason()).increment();
            LOG.warn("reaping worker instance {} ({}: silent for {} s); releasing its state", instance.instanceId(),
                    instance.reason().label(), TimeUnit.NANOSECONDS.toSeconds(instance.silentNs()));
            for (InstanceLivenessTarget target : targets) {
                try {
                    target.dropInstanceState(instance.instanceId());
                } catch (RuntimeException e) {
                    dropFailures.increment();
                    LOG.error("cannot release {} state of instance {}", target.livenessName(), instance.instanceId(), e);
                }
            }
        }
        connections.prune();
        return all;
    }

    public long reaped(InstanceLivenessTarget.Reason reason) {
        return reaped.get(reason).sum();
    }

    /** Scans run so far (a stuck release never stops them). */
    public long scans() {
        return scans.sum();
    }

    /** Releases (of any instance, reaped or unregistered) that ran past their time on the release thread. */
    public long releaseTimeouts() {
        return releases.timeouts();
    }

    /** Releases that failed: on the release thread (each failed attempt), or a target that threw when asked to drop. */
    public long releaseFailures() {
        return releases.failures() + dropFailures.sum();
    }

    public int trackedInstances() {
        int count = 0;
        for (InstanceLivenessTarget target : targets) {
            try {
                count += target.trackedInstanceCount();
            } catch (RuntimeException e) {
                // counted where it matters (scan); status must not fail
            }
        }
        return count;
    }

    public void resetCounters() {
        reaped.values().forEach(LongAdder::reset);
        dropFailures.reset();
        targetFailures.reset();
        releases.resetCounters();
    }
}
