package io.lmcache.server.warmup;

import io.lmcache.server.agent.NamedThreads;
import io.lmcache.server.transfer.CopyPath;
import io.lmcache.server.transfer.InstanceContext;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * When the GPU warm-up runs (issues 30 and 52). The start-up warm-up ({@link Warmup}) runs the host copy path only: there is no
 * GPU context before the first REGISTER (issue 32), so a GPU's CUDA path (its copy path's Java, the engine's lanes, batches,
 * kernel launches, events, the completions on lmcache-cuda-events) and the pin of the pool region its first STOREs allocate
 * from are both cold then. So the first successful REGISTER of a worker on each device starts, once per device and on a thread
 * of its own (lmcache-gpu-warmup-DEVICE), that device's {@link Runner}; TP=8 registers eight workers on eight lanes at once and
 * so runs eight warm-ups side by side.
 *
 * <p>The REGISTER reply waits for it at most {@code --gpu-warmup-register-wait-ms} (by default the budget plus its grace: a
 * worker that STOREs right after a reply that did not wait finds the path cold). Past the wait, or with 0, the warm-up yields: its {@link Stop} turns
 * true as soon as a worker registered on the device has copied through its path ({@link CopyPath#copied}), so a real
 * transfer shares the lanes with one scratch round at most, and the outcome says {@code yielded}. The pin of the first
 * regions the runner starts is not undone by a yield: the first STORE needs those regions pinned anyway. A warm-up that
 * fails is logged once (it runs once) and counted; one that overruns keeps running on its own thread, where it stops at its
 * budget. Neither ever fails the REGISTER. Host-testable: the runner and which paths are warmed are given.
 */
public final class GpuWarmups implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(GpuWarmups.class);
    /** What a warm-up may run beyond the budget: the scratch allocation, the scratch server, the first regions' pin. */
    static final long GRACE_NS = TimeUnit.MILLISECONDS.toNanos(1000);
    static final String YIELDED = "yielded";

    /** One device's warm-up: runs on its own thread, once; may throw (counted as a failure). */
    @FunctionalInterface
    public interface Runner {
        Outcome run(InstanceContext worker, long budgetNs, Stop stop) throws Exception;
    }

    /** Asked by a runner between rounds: whether to stop now (the server is shutting down, or a worker's transfer came). */
    @FunctionalInterface
    public interface Stop {
        boolean requested();
    }

    /**
     * What a runner did.
     *
     * @param rounds STORE+RETRIEVE rounds through the copy path on scratch memory
     * @param stoppedBy "budget", "done", "stopping", "yielded" (set by {@link GpuWarmups}), or why it stopped early
     * @param regionsPinned pool regions pinned ahead of the first STOREs
     * @param poolWaitMs how long the rounds waited for the pool's background pinning to end before they started
     */
    public record Outcome(int rounds, String stoppedBy, int regionsPinned, long poolWaitMs) {
        /** An outcome whose rounds did not wait for the pool's pinning. */
        public Outcome(int rounds, String stoppedBy, int regionsPinned) {
            this(rounds, stoppedBy, regionsPinned, 0);
        }

        /** Whether it ran as meant: to its budget, to the end of its rounds, until the server stopped or a worker's transfer came. */
        public boolean ok() {
            return stoppedBy.equals("budget") || stoppedBy.equals("done") || stoppedBy.equals("stopping") || stoppedBy.equals(YIELDED);
        }
    }

    /** A device's warm-up as /status shows it ({@code jit_warmup.gpu.devices}). */
    private static final class Task {
        final String device;
        final long startNs = System.nanoTime();
        final CompletableFuture<Outcome> done = new CompletableFuture<>();
        /** The paths registered on the device while it runs: the first transfer through any of them makes it yield. */
        final List<CopyPath> paths = new CopyOnWriteArrayList<>();
        volatile boolean yielded;
        volatile long elapsedNs = -1;

        Task(String device, CopyPath first) {
            this.device = device;
            if (first != null) {
                paths.add(first);
            }
        }

        /** Whether a worker's transfer has come (and so the warm-up yields); remembered once seen. */
        boolean transferCame() {
            if (!yielded) {
                for (CopyPath path : paths) {
                    if (path.copied()) {
                        yielded = true;
                        break;
                    }
                }
            }
            return yielded;
        }

        Map<String, Object> toMap() {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("device", device);
            Outcome outcome = done.getNow(null);
            out.put("state", outcome == null ? "running" : !outcome.ok() ? "failed" : outcome.stoppedBy().equals(YIELDED) ? YIELDED : "done");
            out.put("rounds", outcome == null ? 0 : outcome.rounds());
            out.put("ms", elapsedNs < 0 ? TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNs) : TimeUnit.NANOSECONDS.toMillis(elapsedNs));
            out.put("stopped_by", outcome == null ? "" : outcome.stoppedBy());
            out.put("regions_pinned", outcome == null ? 0 : outcome.regionsPinned());
            out.put("pool_pin_wait_ms", outcome == null ? 0 : outcome.poolWaitMs());
            return out;
        }
    }

    private final long budgetNs;
    private final long registerWaitNs;
    private final Predicate<CopyPath> warms;
    private final Runner runner;
    private final Map<String, Task> tasks = new ConcurrentHashMap<>();
    private final List<Thread> threads = new ArrayList<>();
    private final LongAdder started = new LongAdder();
    private final LongAdder failures = new LongAdder();
    private final LongAdder yields = new LongAdder();
    private final LongAdder registersWaited = new LongAdder();
    /** The warm-up that ended last (/status {@code last_ms}, {@code state}); null before the first ends. */
    private volatile Task last;
    private volatile boolean stopping;

    /** Warms each device of a path {@code warms} accepts once, with {@code runner}, for {@code budgetNs} (0: off); never waits. */
    public GpuWarmups(long budgetNs, Predicate<CopyPath> warms, Runner runner) {
        this(budgetNs, 0, warms, runner);
    }

    /** As above; a device's REGISTER waits for its warm-up at most {@code registerWaitNs} ({@code --gpu-warmup-register-wait-ms}). */
    public GpuWarmups(long budgetNs, long registerWaitNs, Predicate<CopyPath> warms, Runner runner) {
        this.budgetNs = Math.max(0, budgetNs);
        this.registerWaitNs = Math.max(0, registerWaitNs);
        this.warms = warms;
        this.runner = runner;
    }

    /** Never warms anything. */
    public static GpuWarmups off() {
        return new GpuWarmups(0, path -> false, (worker, budgetNs, stop) -> new Outcome(0, "off", 0));
    }

    /**
     * After a successful REGISTER, on its lane: starts the path's device's warm-up if this is its first, else has the running
     * one yield to this path's transfers too. Returns at once (the reply never waits for the warm-up); never throws.
     */
    public void afterRegister(InstanceContext worker) {
        CopyPath path = worker == null ? null : worker.copyPath();
        if (path != null && warms.test(path)) {
            startDevice(path.device(), path, (budget, stop) -> runner.run(worker, budget, stop));
            if (registerWaitNs > 0) {
                awaitForRegister(path.device());
            }
        }
    }

    /** {@code --gpu-warmup-register-wait-ms}: the REGISTER reply waits for its device's warm-up, at most that long. */
    private void awaitForRegister(String device) {
        registersWaited.increment();
        try {
            awaitEnd(device, registerWaitNs);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** One device's warm-up as {@link #afterRegister} runs it: {@code job} on the device's first call. */
    @FunctionalInterface
    interface Job {
        Outcome run(long budgetNs, Stop stop) throws Exception;
    }

    /**
     * Starts {@code device}'s warm-up ({@code job}) if this is its first call; a later call while it runs adds {@code path}
     * (null: none) to the paths whose first transfer makes it yield. Never waits, never throws.
     */
    void startDevice(String device, CopyPath path, Job job) {
        if (budgetNs == 0 || stopping) {
            return;
        }
        boolean[] mine = new boolean[1];
        Task task = tasks.computeIfAbsent(device, key -> {
            mine[0] = true;
            return new Task(key, path);
        });
        if (mine[0]) {
            start(task, job);
        } else if (path != null && !task.done.isDone()) {
            task.paths.add(path); // bounded: one entry per REGISTER on the device during its warm-up's budget
        }
    }

    /** Waits until {@code device}'s warm-up ended, at most {@code timeoutNs} (tests); whether it ended. */
    boolean awaitEnd(String device, long timeoutNs) throws InterruptedException {
        Task task = tasks.get(device);
        if (task == null) {
            return false;
        }
        try {
            task.done.get(timeoutNs, TimeUnit.NANOSECONDS);
            return true;
        } catch (TimeoutException e) {
            return false;
        } catch (ExecutionException e) {
            return true; // never: a failure is an outcome
        }
    }

    private void start(Task task, Job job) {
        started.increment();
        // runs on: lmcache-gpu-warmup-DEVICE (one-shot: ends with the warm-up)
        Thread thread = NamedThreads.thread("lmcache-gpu-warmup-" + task.device, true, () -> run(task, job));
        synchronized (threads) {
            threads.add(thread);
        }
        thread.start();
    }

    private void run(Task task, Job job) {
        Outcome outcome = new Outcome(0, "failed: ended without an outcome", 0);
        try {
            Outcome ran = job.run(budgetNs, () -> stopping || task.transferCame());
            if (ran != null) {
                // a runner stopped by a worker's transfer says "stopping" (all it was told): the task knows it yielded
                outcome = ran.stoppedBy().equals("stopping") && task.yielded && !stopping
                        ? new Outcome(ran.rounds(), YIELDED, ran.regionsPinned(), ran.poolWaitMs()) : ran;
            }
        } catch (Throwable t) {
            outcome = new Outcome(0, "failed: " + t, 0);
        } finally {
            if (!outcome.ok()) {
                failures.increment();
            } else if (outcome.stoppedBy().equals(YIELDED)) {
                yields.increment();
            }
            task.elapsedNs = System.nanoTime() - task.startNs;
            task.paths.clear(); // the registrations' paths are not kept past the warm-up
            last = task; // before its end is seen: /status then never shows an ended warm-up as idle
            task.done.complete(outcome);
        }
        // one line per device (each warms once): INFO when it ran as meant, WARN when not (the GPU path then starts cold, as before)
        String line = "GPU warm-up on {}: {} rounds (STORE and RETRIEVE through the CUDA copy path into scratch memory) in {} ms, {} pool"
                + " region(s) pinned ahead of the first STOREs, {} ms waiting for the pool's pinning, stopped by: {}";
        Object[] values = {task.device, outcome.rounds(), TimeUnit.NANOSECONDS.toMillis(task.elapsedNs), outcome.regionsPinned(),
            outcome.poolWaitMs(), outcome.stoppedBy()};
        if (outcome.ok()) {
            LOG.info(line, values);
        } else {
            LOG.warn(line, values);
        }
    }

    /**
     * What {@code /status} shows under {@code jit_warmup.gpu}: {@code state} (off, idle before any GPU REGISTER, running while a
     * device's warm-up runs, else how the last one ended: done, yielded or failed), {@code count} (warm-ups started),
     * {@code last_ms} (the last one's duration; -1 before any ended), and per device.
     */
    public Map<String, Object> status() {
        Map<String, Object> out = new LinkedHashMap<>();
        Task ended = last;
        out.put("state", state(ended));
        out.put("count", started.sum());
        out.put("last_ms", ended == null ? -1 : TimeUnit.NANOSECONDS.toMillis(ended.elapsedNs));
        out.put("budget_ms", TimeUnit.NANOSECONDS.toMillis(budgetNs));
        out.put("started", started.sum());
        out.put("failures", failures.sum());
        out.put("yields", yields.sum());
        out.put("register_wait_ms", TimeUnit.NANOSECONDS.toMillis(registerWaitNs));
        out.put("registers_waited", registersWaited.sum());
        List<Map<String, Object>> devices = new ArrayList<>();
        tasks.values().stream().sorted((a, b) -> a.device.compareTo(b.device)).forEach(task -> devices.add(task.toMap()));
        out.put("devices", devices);
        return out;
    }

    private String state(Task ended) {
        if (budgetNs == 0) {
            return "off";
        }
        for (Task task : tasks.values()) {
            if (!task.done.isDone()) {
                return "running";
            }
        }
        return ended == null ? "idle" : String.valueOf(ended.toMap().get("state"));
    }

    long startedCount() {
        return started.sum();
    }

    long failureCount() {
        return failures.sum();
    }

    long yieldCount() {
        return yields.sum();
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
