package io.lmcache.server.config;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * What operators set beyond LMCache's core flags: the pool file's mode, the budget of CPU workers'
 * shared-memory mappings, the sampling of the chunk lifecycle histograms, and the instance label
 * every metric carries.
 *
 * @param shmMode the pool segment's permission bits ({@code --shm-mode}), set explicitly after
 *     creation (the umask does not apply); never any access for others
 * @param shmMaxSegments distinct CPU workers' segments mapped at once, server-wide
 *     ({@code --shm-max-segments}; default a quarter of {@code vm.max_map_count})
 * @param shmMaxMappedBytes bytes of CPU workers' segments mapped at once, server-wide
 * @param metricsSampleRate the fraction of chunks whose lifecycle (lifetime, idle time, reuse gaps)
 *     is recorded, in (0, 1]; counters always count everything
 * @param serviceInstanceId the {@code service_instance_id} label on every metric and {@code target_info}
 * @param numaPlacement {@code --numa-placement auto}: the pool's regions on the GPUs' NUMA nodes where the host has several
 * @param warmupIterations rounds of the start-up JIT warm-up on scratch memory ({@code --warmup-iterations}; 0: none)
 * @param warmupBudgetNs the most the warm-up may add to start-up ({@code --warmup-budget-ms}); it stops there, done or not
 * @param gpuWarmupBudgetNs the GPU warm-up's rounds per device, run once after the device's first REGISTER
 *     ({@code --gpu-warmup-budget-ms}; 0: off)
 * @param gpuWarmupRegisterWaitNs how long that REGISTER's reply may wait for the warm-up ({@code --gpu-warmup-register-wait-ms};
 *     0: never, the warm-up runs beside the reply and yields to the worker's first transfer)
 * @param warmupBackgroundNs how long the start-up warm-up's rounds may go on after {@code ready}, until the first request
 *     ({@code --warmup-background-ms}; 0: off)
 * @param cpuCopyThreads the threads a CPU worker's STORE or RETRIEVE copies with, its transfer thread included
 *     ({@code --cpu-copy-threads}; 0: auto, from the host's cores and NUMA nodes)
 */
public record OperatorSettings(int shmMode, int shmMaxSegments, long shmMaxMappedBytes, double metricsSampleRate,
        String serviceInstanceId, boolean numaPlacement, int warmupIterations, long warmupBudgetNs,
        long gpuWarmupBudgetNs, long gpuWarmupRegisterWaitNs, long warmupBackgroundNs, int cpuCopyThreads) {
    /** Rounds of the warm-up by default: see bench/RESULTS.md#gpu-fresh-server-against-warm for the measurement behind it. */
    public static final int DEFAULT_WARMUP_ITERATIONS = 3000;
    public static final long DEFAULT_WARMUP_BUDGET_MS = 1000;
    /** The GPU warm-up's time per device at its first REGISTER (issues 30, 52); past the REGISTER's wait it yields to transfers. */
    public static final long DEFAULT_GPU_WARMUP_BUDGET_MS = 500;
    /**
     * The first REGISTER's reply waits for its GPU's warm-up up to the budget plus its grace (bench/RESULTS.md#gpu-fresh-server-against-warm:
     * a worker that STOREs right after a reply that did not wait found the CUDA path cold).
     */
    public static final int DEFAULT_GPU_WARMUP_REGISTER_WAIT_MS = 1500;
    /**
     * The start-up warm-up's rounds after {@code ready} on hosts of {@link Tuning#SPIN_MIN_CORES} cores or more: vLLM loads its
     * model between the sidecar's start and its workers' first REGISTER, and the rounds left over when the start-up budget ran
     * out run then, on a core nothing else needs. Smaller hosts need theirs for the engine's own start: off there.
     */
    public static final long DEFAULT_WARMUP_BACKGROUND_MS = 30_000;
    /** The most {@code --cpu-copy-threads} takes: far above any host's useful count, a bound on threads started. */
    static final int MAX_CPU_COPY_THREADS = 256;
    /** Owner read-write only: no other user can read or write tenants' KV in the pool. */
    public static final int DEFAULT_SHM_MODE = 0600;
    /** The kernel's default {@code vm.max_map_count}, used when /proc does not say. */
    static final long KERNEL_DEFAULT_MAX_MAP_COUNT = 65_530;
    /** The default server-wide budget of mapped bytes: far above any host's memory, far below the address space. */
    static final long DEFAULT_MAX_MAPPED_GB = 16_384;
    private static final Path MAX_MAP_COUNT = Path.of("/proc/sys/vm/max_map_count");

    /** The defaults (tests). */
    public static OperatorSettings defaults(String instanceId) {
        return new OperatorSettings(DEFAULT_SHM_MODE, defaultMaxSegments(maxMapCount()), DEFAULT_MAX_MAPPED_GB << 30, 0.01, instanceId, true,
                DEFAULT_WARMUP_ITERATIONS, TimeUnit.MILLISECONDS.toNanos(DEFAULT_WARMUP_BUDGET_MS),
                TimeUnit.MILLISECONDS.toNanos(DEFAULT_GPU_WARMUP_BUDGET_MS), TimeUnit.MILLISECONDS.toNanos(DEFAULT_GPU_WARMUP_REGISTER_WAIT_MS), 0, 0);
    }

    static OperatorSettings validate(ServerOptions o, String serviceInstanceId, List<String> warnings) throws ConfigException {
        int mode = o.shmMode == null ? DEFAULT_SHM_MODE : shmMode(o.shmMode);
        long mapCount = maxMapCount();
        int segments = defaultMaxSegments(mapCount);
        if (o.shmMaxSegments != null) {
            // half the kernel's limit at most: the JVM, its threads, the pool and CUDA need the rest
            segments = ConfigLoader.intIn("--shm-max-segments", o.shmMaxSegments, 1, (int) Math.min(Integer.MAX_VALUE, Math.max(1, mapCount / 2)));
        }
        long mappedGb = ConfigLoader.intIn("--shm-max-mapped-gb", o.shmMaxMappedGb, 1, 1 << 16);
        double rate;
        try {
            rate = Double.parseDouble(o.metricsSampleRate.strip());
        } catch (NumberFormatException e) {
            throw new ConfigException("--metrics-sample-rate", "must be a number in (0, 1], got '" + o.metricsSampleRate + "'");
        }
        if (!(rate > 0) || rate > 1) {
            throw new ConfigException("--metrics-sample-rate", "must be in (0, 1], got " + o.metricsSampleRate.strip());
        }
        boolean numa = switch (o.numaPlacement.strip().toLowerCase(Locale.ROOT)) {
            case "auto" -> true;
            case "off" -> false;
            default -> throw new ConfigException("--numa-placement", "must be auto or off, got '" + o.numaPlacement + "'");
        };
        int warmupIterations = ConfigLoader.intIn("--warmup-iterations", o.warmupIterations, 0, 1_000_000);
        int warmupBudgetMs = ConfigLoader.intIn("--warmup-budget-ms", o.warmupBudgetMs, 0, 60_000);
        int gpuWarmupBudgetMs = ConfigLoader.intIn("--gpu-warmup-budget-ms", o.gpuWarmupBudgetMs, 0, 10_000);
        int gpuRegisterWaitMs = ConfigLoader.intIn("--gpu-warmup-register-wait-ms", o.gpuWarmupRegisterWaitMs, 0, 10_000);
        long backgroundMs = o.warmupBackgroundMs.strip().equalsIgnoreCase("auto") ? defaultBackgroundMs(Runtime.getRuntime().availableProcessors())
                : ConfigLoader.intIn("--warmup-background-ms", o.warmupBackgroundMs, 0, 600_000);
        int copyThreads = o.cpuCopyThreads.strip().equalsIgnoreCase("auto") ? 0
                : ConfigLoader.intIn("--cpu-copy-threads", o.cpuCopyThreads, 1, MAX_CPU_COPY_THREADS);
        return new OperatorSettings(mode, segments, mappedGb << 30, rate, serviceInstanceId.strip(), numa, warmupIterations,
                TimeUnit.MILLISECONDS.toNanos(warmupBudgetMs), TimeUnit.MILLISECONDS.toNanos(gpuWarmupBudgetMs),
                TimeUnit.MILLISECONDS.toNanos(gpuRegisterWaitMs), TimeUnit.MILLISECONDS.toNanos(backgroundMs), copyThreads);
    }

    /** {@code --warmup-background-ms auto} on a host of {@code cores}. */
    static long defaultBackgroundMs(int cores) {
        return cores >= Tuning.SPIN_MIN_CORES ? DEFAULT_WARMUP_BACKGROUND_MS : 0;
    }

    /** Octal permission bits: the owner reads and writes, nobody executes, others get nothing (0600, 0640, 0660). */
    private static int shmMode(String given) throws ConfigException {
        String text = given.strip();
        if (!text.matches("0?[0-7]{3}")) {
            throw new ConfigException("--shm-mode", "must be octal permission bits such as 0600 or 0660, got '" + given + "'");
        }
        int mode = Integer.parseInt(text, 8);
        if ((mode & 0600) != 0600 || (mode & 0111) != 0) {
            throw new ConfigException("--shm-mode", "must let the owner read and write and nobody execute (e.g. 0600, 0660), got " + text);
        }
        if ((mode & 0007) != 0) {
            throw new ConfigException("--shm-mode", "must give others no access (every local user could read or write every tenant's KV);"
                    + " use 0660 and a shared group, got " + text);
        }
        return mode;
    }

    /** A quarter of the kernel's mapping limit: a registration flood stays far from it. */
    static int defaultMaxSegments(long mapCount) {
        return (int) Math.max(1, Math.min(Integer.MAX_VALUE, mapCount / 4));
    }

    /** {@code vm.max_map_count}: mappings one process may hold before mmap fails (and the JVM aborts). */
    public static long maxMapCount() {
        // a reader, not Files.readString: that trusts the size procfs reports and returned one byte ("6") of "65530"
        try (BufferedReader reader = Files.newBufferedReader(MAX_MAP_COUNT)) {
            String line = reader.readLine();
            return line == null ? KERNEL_DEFAULT_MAX_MAP_COUNT : Long.parseLong(line.strip());
        } catch (IOException | NumberFormatException e) {
            return KERNEL_DEFAULT_MAX_MAP_COUNT;
        }
    }

    /** The mode as {@code /config} shows it. */
    public String shmModeText() {
        return String.format(Locale.ROOT, "0%o", shmMode);
    }
}
