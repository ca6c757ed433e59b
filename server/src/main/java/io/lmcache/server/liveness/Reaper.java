package io.lmcache.server.liveness;

import io.lmcache.server.loop.NamedThreads;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The worker reaper: every {@code timeout / 4} (sooner when the disconnect grace needs it) it asks
 * every target for its stale instances, then has every target drop each reaped id. Drops run on a
 * small bounded executor and are waited for with a timeout: a release that hangs (a CUDA IPC close
 * stuck in the driver, LMCache #4676) is logged and counted, and the reaper and every other worker
 * carry on. A target that throws is logged and the others still run.
 */
public final class Reaper implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(Reaper.class);

    private final List<InstanceLivenessTarget> targets;
    private final long timeoutNs;
    private final long graceNs;
    private final long periodNs;
    private final long releaseTimeoutNs;
    private final PeerConnections connections;
    private final ExecutorService releases;
    private final Map<InstanceLivenessTarget.Reason, LongAdder> reaped = new EnumMap<>(InstanceLivenessTarget.Reason.class);
    private final LongAdder releaseTimeouts = new LongAdder();
    private final LongAdder releaseFailures = new LongAdder();
    private final LongAdder targetFailures = new LongAdder();
    private Thread thread;
    private volatile boolean running;

    public Reaper(List<InstanceLivenessTarget> targets, long timeoutNs, long graceNs, long disconnectGraceNs, long releaseTimeoutNs,
            PeerConnections connections) {
        this.targets = List.copyOf(targets);
        this.timeoutNs = timeoutNs;
        this.graceNs = graceNs;
        this.releaseTimeoutNs = releaseTimeoutNs;
        this.connections = connections;
        long period = timeoutNs / 4;
        if (disconnectGraceNs > 0) {
            period = Math.min(period, disconnectGraceNs / 3);
        }
        this.periodNs = Math.max(TimeUnit.MILLISECONDS.toNanos(50), period);
        this.releases = new ThreadPoolExecutor(2, 2, 0, TimeUnit.MILLISECONDS, new ArrayBlockingQueue<>(1024),
                NamedThreads.factory("lmcache-reaper-release"));
        for (InstanceLivenessTarget.Reason reason : InstanceLivenessTarget.Reason.values()) {
            reaped.put(reason, new LongAdder());
        }
    }

    /** Starts the thread when reaping is enabled and there is something to reap from; returns whether it did. */
    public boolean start() {
        if (timeoutNs <= 0 || targets.isEmpty()) {
            return false;
        }
        running = true;
        thread = new Thread(this::run, "lmcache-mp-worker-reaper");
        thread.setDaemon(true);
        thread.start();
        LOG.info("worker reaper: every {} ms; pinged workers reaped after {} s of silence, never-pinged ones after {} s",
                TimeUnit.NANOSECONDS.toMillis(periodNs), timeoutNs / 1e9, graceNs / 1e9);
        return true;
    }

    public boolean isRunning() {
        return thread != null && thread.isAlive();
    }

    public long periodNs() {
        return periodNs;
    }

    private void run() {
        while (running) {
            try {
                TimeUnit.NANOSECONDS.sleep(periodNs);
            } catch (InterruptedException e) {
                return;
            }
            if (running) {
                scan();
            }
        }
    }

    /** One pass over every target; returns the instances reaped. */
    public List<InstanceLivenessTarget.Reaped> scan() {
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
        }
        List<Future<?>> pending = new ArrayList<>();
        List<String> what = new ArrayList<>();
        for (InstanceLivenessTarget.Reaped instance : all) {
            for (InstanceLivenessTarget target : targets) {
                try {
                    pending.add(releases.submit(() -> target.dropInstanceState(instance.instanceId())));
                    what.add(target.livenessName() + " / instance " + instance.instanceId());
                } catch (RejectedExecutionException e) {
                    releaseFailures.increment();
                    LOG.error("cannot release {} state of instance {}: the release executor is saturated (earlier releases hang)",
                            target.livenessName(), instance.instanceId());
                }
            }
        }
        long deadlineNs = System.nanoTime() + releaseTimeoutNs;
        for (int i = 0; i < pending.size(); i++) {
            try {
                pending.get(i).get(Math.max(0, deadlineNs - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (TimeoutException e) {
                releaseTimeouts.increment();
                LOG.error("release of {} did not finish within {} ms; it keeps running in the background, the reaper goes on",
                        what.get(i), TimeUnit.NANOSECONDS.toMillis(releaseTimeoutNs));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return all;
            } catch (java.util.concurrent.ExecutionException e) {
                releaseFailures.increment();
                LOG.error("release of {} failed", what.get(i), e.getCause());
            }
        }
        connections.prune();
        return all;
    }

    public long reaped(InstanceLivenessTarget.Reason reason) {
        return reaped.get(reason).sum();
    }

    public long releaseTimeouts() {
        return releaseTimeouts.sum();
    }

    public long releaseFailures() {
        return releaseFailures.sum();
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
        releaseTimeouts.reset();
        releaseFailures.reset();
        targetFailures.reset();
    }

    @Override
    public void close() {
        running = false;
        if (thread != null) {
            thread.interrupt();
            try {
                thread.join(TimeUnit.SECONDS.toMillis(5));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        releases.shutdownNow();
    }
}
