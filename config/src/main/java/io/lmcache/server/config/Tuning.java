package io.lmcache.server.config;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;

/**
 * The performance knobs an operator or a benchmark sets with {@code -Dlmcache.*} JVM properties (through
 * {@code LMCACHE_JAVA_OPTS}), read once at start by {@link ConfigLoader} and validated like a flag (a bad value is refused,
 * exit 2), then handed to their owners: the CUDA copy engine, the request dispatcher's transfer pool and the L1 pool's
 * preparation. They are not flags because they only move measured trade-offs (bench/RESULTS.md and its journal name the run
 * behind each default); docs/internals.md lists them. {@code /config} shows each under its property name ({@link #describe}).
 *
 * @param copyKernelBlocks blocks of the gather/scatter kernel, so the SMs it can occupy; the model keeps the rest
 * @param stagingHalfBytes one staging half in device memory; each of a GPU's two lanes has two
 * @param firstBatchBytes the first staging batch of a transfer that finds its lane idle (small, so the DMA starts early)
 * @param dmaHeadBytes the head of such a transfer that goes by batched copies straight to the pool; 0 = off
 * @param storeDmaHeadMinPieceBytes the smallest piece worth a copy of its own in a STORE's head (device to pool)
 * @param retrieveDmaHeadMinPieceBytes the same for a RETRIEVE's head (pool to device): measured on the H200, 136 KiB pieces
 *     (a Qwen-like model's Mamba pages) moved faster in the head than through the staging kernel to the pool, but slower from
 *     it (bench/RESULTS.md#gpu-hybrid-models)
 * @param batchGrowth each staging batch after the first is this many times the one before (up to a half)
 * @param warmContext launch an empty kernel as a kernel-first transfer starts, so the GPU switches context meanwhile
 * @param queryWorkerEvent ask the host whether the worker's event fired before making the streams wait for it
 * @param hostFnWake a host function at each transfer's end wakes the event poller (else its poll finds the completion)
 * @param transferSpinNs how long an idle transfer thread busy-waits before it parks; 0 = never spins
 * @param prepareThreads the L1 pool preparation's threads; 0 = chosen from the cores and the pages
 * @param stackLimitBytes when positive, each CUDA context's per-thread stack limit ({@code CU_LIMIT_STACK_SIZE}, set as
 *     the context is made: the copy kernel uses no local memory), so the driver reserves less device memory (256 by default:
 *     an H200's context held ~520 MiB at the driver's 1 KiB, ~322 MiB at 256 B; bench/RESULTS.md#gpu-device-memory); 0 = the
 *     driver's default
 */
public record Tuning(int copyKernelBlocks, long stagingHalfBytes, long firstBatchBytes, long dmaHeadBytes, long storeDmaHeadMinPieceBytes,
        long retrieveDmaHeadMinPieceBytes, int batchGrowth, boolean warmContext, boolean queryWorkerEvent, boolean hostFnWake,
        long transferSpinNs, int prepareThreads, long stackLimitBytes) {
    /** The property of each component, in component order (what {@link #describe} shows, and tests walk). */
    public static final List<String> PROPERTIES = List.of("lmcache.cuda.copyBlocks", "lmcache.cuda.stagingMiB", "lmcache.cuda.firstBatchKiB",
            "lmcache.cuda.dmaHeadKiB", "lmcache.cuda.storeDmaHeadMinPieceKiB", "lmcache.cuda.retrieveDmaHeadMinPieceKiB",
            "lmcache.cuda.batchGrowth", "lmcache.cuda.warmContext",
            "lmcache.cuda.queryWorkerEvent", "lmcache.cuda.hostFnWake", "lmcache.transfer.spinUs", "lmcache.l1.prepareThreads",
            "lmcache.cuda.stackLimitBytes");
    /**
     * Hosts with fewer cores never spin unless the property says so: a parked thread takes tens of microseconds to wake, in
     * series with a request alone in flight, but a spinning one holds a core, and on small hosts the clients and the pools need
     * every core (measured on the 2-core development machine: bench/RESULTS.md#request-path-latency).
     */
    public static final int SPIN_MIN_CORES = 8;
    /**
     * The spin window on such hosts: a worker's requests of one engine step (and a hit's RETRIEVE after the scheduler's
     * LOOKUP) come within it, so they find a spinning thread; an idle server parks after it. One spinning thread (the
     * transfer pool's), so at most one core.
     */
    public static final long BIG_HOST_SPIN_US = 5000;
    /** Properties that were replaced, with what replaced them: one still set is refused, not silently ignored. */
    static final Map<String, String> RETIRED = Map.of("lmcache.cuda.dmaHeadMinPieceKiB",
            "lmcache.cuda.storeDmaHeadMinPieceKiB and lmcache.cuda.retrieveDmaHeadMinPieceKiB (one threshold per direction)");
    private static final long KIB = 1L << 10;
    private static final long MIB = 1L << 20;

    /** The defaults on a small host (no spinning), whatever the JVM was given: tests and tools. */
    public static Tuning defaults() {
        try {
            return from(property -> null, 1);
        } catch (ConfigException e) {
            throw new AssertionError(e); // no property is set: every default is in range
        }
    }

    /** This JVM's {@code -Dlmcache.*} properties on this host; refuses a value that is not a number (or boolean) in range. */
    public static Tuning fromSystemProperties() throws ConfigException {
        return from(System::getProperty, Runtime.getRuntime().availableProcessors());
    }

    /** From {@code properties} (name to value, null when unset) on a host of {@code cores}. */
    static Tuning from(UnaryOperator<String> properties, int cores) throws ConfigException {
        for (Map.Entry<String, String> retired : RETIRED.entrySet()) {
            if (properties.apply(retired.getKey()) != null) {
                throw new ConfigException("-D" + retired.getKey(), "is no longer read: set " + retired.getValue());
            }
        }
        Reader in = new Reader(properties);
        return new Tuning(
                (int) in.number(0, 8, 1, 1024), // copyBlocks
                in.number(1, 32, 1, 1024) * MIB, // stagingMiB
                in.number(2, 2048, 64, 1 << 20) * KIB, // firstBatchKiB
                in.number(3, 16384, 0, 1 << 24) * KIB, // dmaHeadKiB
                in.number(4, 128, 1, 1 << 20) * KIB, // storeDmaHeadMinPieceKiB
                in.number(5, 256, 1, 1 << 20) * KIB, // retrieveDmaHeadMinPieceKiB
                (int) in.number(6, 2, 2, 64), // batchGrowth
                in.flag(7), // warmContext
                in.flag(8), // queryWorkerEvent
                in.flag(9), // hostFnWake
                TimeUnit.MICROSECONDS.toNanos(in.number(10, cores >= SPIN_MIN_CORES ? BIG_HOST_SPIN_US : 0, 0, 10_000_000)), // spinUs
                (int) in.number(11, 0, 0, 1024), // prepareThreads
                in.number(12, 256, 0, 1L << 20)); // stackLimitBytes
    }

    /** Property name to effective value, in the property's unit (what {@code /config} shows under {@code tuning}). */
    public Map<String, Object> describe() {
        List<Object> values = List.of(copyKernelBlocks, stagingHalfBytes / MIB, firstBatchBytes / KIB, dmaHeadBytes / KIB,
                storeDmaHeadMinPieceBytes / KIB, retrieveDmaHeadMinPieceBytes / KIB, batchGrowth, warmContext, queryWorkerEvent,
                hostFnWake, TimeUnit.NANOSECONDS.toMicros(transferSpinNs), prepareThreads, stackLimitBytes);
        Map<String, Object> out = new LinkedHashMap<>();
        for (int i = 0; i < PROPERTIES.size(); i++) {
            out.put(PROPERTIES.get(i), values.get(i));
        }
        return out;
    }

    /** Reads the properties by their index in {@link #PROPERTIES}, naming the property in a refusal. */
    private record Reader(UnaryOperator<String> properties) {
        long number(int index, long defaultValue, long min, long max) throws ConfigException {
            String text = properties.apply(PROPERTIES.get(index));
            if (text == null) {
                return defaultValue;
            }
            long value;
            try {
                value = Long.parseLong(text.strip());
            } catch (NumberFormatException e) {
                value = Long.MIN_VALUE;
            }
            if (value < min || value > max) {
                throw new ConfigException("-D" + PROPERTIES.get(index), "must be a whole number in [" + min + ", " + max + "], got '"
                        + clip(text) + "'");
            }
            return value;
        }

        boolean flag(int index) throws ConfigException {
            String text = properties.apply(PROPERTIES.get(index));
            if (text == null) {
                return true;
            }
            return switch (text.strip().toLowerCase(Locale.ROOT)) {
                case "true" -> true;
                case "false" -> false;
                default -> throw new ConfigException("-D" + PROPERTIES.get(index), "must be true or false, got '" + clip(text) + "'");
            };
        }

        private static String clip(String text) {
            return text.length() <= 40 ? text : text.substring(0, 40) + "...";
        }
    }
}
