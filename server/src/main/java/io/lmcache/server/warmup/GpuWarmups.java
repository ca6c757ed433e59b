package io.lmcache.server.warmup;

import io.lmcache.server.agent.NamedThreads;
import io.lmcache.server.transfer.CopyPath;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * When the GPU warm-up runs and what a REGISTER waits for (issue 30). The start-up warm-up ({@link Warmup}) runs the host copy
 * path only: there is no GPU context before the first REGISTER (issue 32), so a GPU's CUDA path (its copy path's Java, the
 * engine's lanes, batches, kernel launches, events, the completions on lmcache-cuda-events) and the pin of the pool region
 * its first STOREs allocate from are both cold then. So the first successful REGISTER of a worker on each device starts, once
 * per device and on a thread of its own (lmcache-gpu-warmup-DEVICE), that device's {@link Runner}; TP=8 registers eight
 * workers on eight lanes at once and so runs eight warm-ups side by side.
 *
 * <p>The REGISTER handler (on the worker's transfer lane, never the request loop) waits for its device's warm-up, at most the
 * budget plus {@link #GRACE_NS}, then replies whatever happened: vLLM registers at engine start, where a few hundred ms are
 * harmless, and a worker that waits does not send requests whose copies would share the lanes with the warm-up's. A warm-up
 * that fails is logged once (it runs once) and counted; one that overruns is counted and keeps running on its own thread,
 * where it stops at its budget. Neither ever fails the REGISTER. Another REGISTER on a device whose warm-up runs waits for
 * the same warm-up, within the same deadline. Host-testable: the runner and which paths are warmed are given.
 */
public final class GpuWarmups implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(GpuWarmups.class);
    /** What a REGISTER waits beyond the budget: the scratch allocation, the scratch server, the first regions' pin. */
    static final long GRACE_NS = TimeUnit.MILLISECONDS.toNanos(1000);

    /** One device's warm-up: runs on its own thread, once; may throw (counted as a failure). */
    @FunctionalInterface
    public interface Runner {
        Outcome run(CopyPath path, long budgetNs, Stop stop) throws Exception;
    }

    /** Asked by a runner between rounds: whether the server is shutting down. */
    @FunctionalInterface
    public interface Stop {
        boolean requested();
    }

    /**
     * What a runner did.
     *
     * @param rounds STORE+RETRIEVE rounds through the copy path on scratch memory
     * @param stoppedBy "budget", "stopping", or why it stopped early
     * @param regionsPinned pool regions pinned ahead of the first STOREs
     */
    public record Outcome(int rounds, String stoppedBy, int regionsPinned) {
        /** Whether it ran as meant: to its budget, to the end of its rounds, or until the server stopped; else a failure. */
        public boolean ok() {
            return stoppedBy.equals("budget") || stoppedBy.equals("done") || stoppedBy.equals("stopping");
        }
    }

    /** A device's warm-up as /status shows it ({@code jit_warmup.gpu.devices}). */
    private static final class Task {
        final String device;
        final long startNs = System.nanoTime();
        final CompletableFuture<Outcome> done = new CompletableFuture<>();
        volatile long elapsedNs = -1;

        Task(String device) {
            this.device = device;
        }

        Map<String, Object> toMap() {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("device", device);
            Outcome outcome = done.getNow(null);
            out.put("state", outcome == null ? "running" : "done");
            out.put("rounds", outcome == null ? 0 : outcome.rounds());
            out.put("ms", elapsedNs < 0 ? TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNs) : TimeUnit.NANOSECONDS.toMillis(elapsedNs));
            out.put("stopped_by", outcome == null ? "" : outcome.stoppedBy());
            out.put("regions_pinned", outcome == null ? 0 : outcome.regionsPinned());
            return out;
        }
    }

    private final long budgetNs;
    private final Predicate<CopyPath> warms;
    private final Runner runner;
    private final Map<String, Task> tasks = new ConcurrentHashMap<>();
    private final List<Thread> threads = new ArrayList<>();
    private final LongAdder started = new LongAdder();
    private final LongAdder failures = new LongAdder();
    private final LongAdder waitTimeouts = new LongAdder();
    private final LongAdder registersWaited = new LongAdder();
    private volatile boolean stopping;

    /** Warms each device of a path {@code warms} accepts once, with {@code runner}, for {@code budgetNs} (0: off). */
    public GpuWarmups(long budgetNs, Predicate<CopyPath> warms, Runner runner) {
        this.budgetNs = Math.max(0, budgetNs);
        this.warms = warms;
        this.runner = runner;
    }

    /** Never warms anything. */
    public static GpuWarmups off() {
        return new GpuWarmups(0, path -> false, (path, budgetNs, stop) -> new Outcome(0, "off", 0));
    }

    /**
     * After a successful REGISTER, on its lane: starts the path's device's warm-up if this is its first, and waits for it,
     * at most the budget plus {@link #GRACE_NS} from its start. Never throws; returns at once when off or not a warmed path.
     */
    public void afterRegister(CopyPath path) {
        if (path != null && warms.test(path)) {
            awaitDevice(path.device(), (budget, stop) -> runner.run(path, budget, stop));
        }
    }

    /** One device's warm-up as {@link #afterRegister} runs it: {@code job} on the device's first call, then waits for it. */
    @FunctionalInterface
    interface Job {
        Outcome run(long budgetNs, Stop stop) throws Exception;
    }

    /** Starts {@code device}'s warm-up ({@code job}) if this is its first call, and waits for it (bounded); never throws. */
    void awaitDevice(String device, Job job) {
        if (budgetNs == 0 || stopping) {
            return;
        }
        Task task = tasks.computeIfAbsent(device, key -> start(key, job));
        registersWaited.increment();
        long leftNs = task.startNs + budgetNs + GRACE_NS - System.nanoTime();
        try {
            task.done.get(Math.max(0, leftNs), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            waitTimeouts.increment();
            LOG.warn("GPU warm-up on {} still running after {} ms: the REGISTER replies now (the warm-up ends at its budget)",
                    task.device, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - task.startNs));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (ExecutionException e) {
            // never: the task completes normally, a failure is an outcome
        }
    }

    private Task start(String device, Job job) {
        Task task = new Task(device);
        started.increment();
        // runs on: lmcache-gpu-warmup-DEVICE (one-shot: ends with the warm-up)
        Thread thread = NamedThreads.thread("lmcache-gpu-warmup-" + device, true, () -> run(task, job));
        synchronized (threads) {
            threads.add(thread);
        }
        thread.start();
        return task;
    }

    private void run(Task task, Job job) {
        Outcome outcome = new Outcome(0, "failed: ended without an outcome", 0);
        try {
            Outcome ran = job.run(budgetNs, () -> stopping);
            if (ran != null) {
                outcome = ran;
            }
        } catch (Throwable t) {
            outcome = new Outcome(0, "failed: " + t, 0);
        } finally {
            if (!outcome.ok()) {
                failures.increment();
            }
            task.elapsedNs = System.nanoTime() - task.startNs;
            task.done.complete(outcome); // every waiting REGISTER replies now, whatever happened
        }
        // one line per device (each warms once): INFO when it ran as meant, WARN when not (the GPU path then starts cold, as before)
        String line = "GPU warm-up on {}: {} rounds (STORE and RETRIEVE through the CUDA copy path on scratch memory) in {} ms, {} pool"
                + " region(s) pinned ahead of the first STOREs, stopped by: {}";
        Object[] values = {task.device, outcome.rounds(), TimeUnit.NANOSECONDS.toMillis(task.elapsedNs), outcome.regionsPinned(),
            outcome.stoppedBy()};
        if (outcome.ok()) {
            LOG.info(line, values);
        } else {
            LOG.warn(line, values);
        }
    }

    /** What {@code /status} shows under {@code jit_warmup.gpu}. */
    public Map<String, Object> status() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("budget_ms", TimeUnit.NANOSECONDS.toMillis(budgetNs));
        out.put("register_wait_max_ms", budgetNs == 0 ? 0 : TimeUnit.NANOSECONDS.toMillis(budgetNs + GRACE_NS));
        out.put("started", started.sum());
        out.put("failures", failures.sum());
        out.put("registers_waited", registersWaited.sum());
        out.put("register_wait_timeouts", waitTimeouts.sum());
        List<Map<String, Object>> devices = new ArrayList<>();
        tasks.values().stream().sorted((a, b) -> a.device.compareTo(b.device)).forEach(task -> devices.add(task.toMap()));
        out.put("devices", devices);
        return out;
    }

    long startedCount() {
        return started.sum();
    }

    long failureCount() {
        return failures.sum();
    }

    long waitTimeoutCount() {
        return waitTimeouts.sum();
    }

    /** Tells running warm-ups to stop after their round in hand and waits for them (bounded): before the GPU backend closes. */
    @Override
    public void close() {
        stopping = true;
        List<Thread> running;
        synchronized (threads) {
            running = List.copyOf(threads);
        }
        long deadlineNs = System.nanoTime() + budgetNs + GRACE_NS;
        for (Thread thread : running) {
            NamedThreads.join(thread, Math.max(1, deadlineNs - System.nanoTime()));
        }
    }
}
