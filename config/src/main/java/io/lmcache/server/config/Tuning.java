package io.lmcache.server.config;

import java.util.Arrays;
import java.util.EnumMap;
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
 * @param openEventAheadChunks a transfer on an idle lane of at least this many chunks has its worker's event opened by the
 *     event poller while the handler plans; 0 = never (shorter plans do not cover the open: bench/RESULTS.md#gpu-hybrid-models)
 * @param stageInPoolOrder a staging batch lays its pieces out in pool order, so a hybrid model's objects of one group go as one
 *     DMA run instead of one run each (off by default until a GPU test run with it on passes: bench/RESULTS.md#gpu-hybrid-models)
 * @param transferSpinNs how long an idle transfer thread busy-waits before it parks; 0 = never spins
 * @param hostRunBytes a CPU worker's copy is cut into runs of about this many bytes, which the copy threads take one at a time
 * @param nativeHostCopy a CPU worker's copies use the native library's non-temporal stores where it loads (else
 *     {@code MemorySegment.copy}: write-allocate reads cost a third of a many-core host's bandwidth, bench/RESULTS.md#cpu-copy-path)
 * @param prepareThreads the L1 pool preparation's threads; 0 = chosen from the cores and the pages
 * @param stackLimitBytes when positive, each CUDA context's per-thread stack limit ({@code CU_LIMIT_STACK_SIZE}, set as
 *     the context is made: the copy kernel uses no local memory), so the driver reserves less device memory (256 by default:
 *     an H200's context held ~520 MiB at the driver's 1 KiB, ~322 MiB at 256 B; bench/RESULTS.md#gpu-device-memory); 0 = the
 *     driver's default
 */
public record Tuning(int copyKernelBlocks, long stagingHalfBytes, long firstBatchBytes, long dmaHeadBytes, long storeDmaHeadMinPieceBytes,
        long retrieveDmaHeadMinPieceBytes, int batchGrowth, boolean warmContext, boolean queryWorkerEvent, boolean hostFnWake,
        int openEventAheadChunks, boolean stageInPoolOrder, long transferSpinNs, long hostRunBytes, boolean nativeHostCopy, int prepareThreads,
        long stackLimitBytes) {
    /**
     * The knobs by name, in component order: each names its {@code -D} property (what {@link #describe} shows, and tests
     * walk), so a reader or a refusal never counts positions.
     */
    public enum Knob {
        COPY_BLOCKS("lmcache.cuda.copyBlocks"),
        STAGING_MIB("lmcache.cuda.stagingMiB"),
        FIRST_BATCH_KIB("lmcache.cuda.firstBatchKiB"),
        DMA_HEAD_KIB("lmcache.cuda.dmaHeadKiB"),
        STORE_DMA_HEAD_MIN_PIECE_KIB("lmcache.cuda.storeDmaHeadMinPieceKiB"),
        RETRIEVE_DMA_HEAD_MIN_PIECE_KIB("lmcache.cuda.retrieveDmaHeadMinPieceKiB"),
        BATCH_GROWTH("lmcache.cuda.batchGrowth"),
        WARM_CONTEXT("lmcache.cuda.warmContext"),
        QUERY_WORKER_EVENT("lmcache.cuda.queryWorkerEvent"),
        HOST_FN_WAKE("lmcache.cuda.hostFnWake"),
        OPEN_EVENT_AHEAD_CHUNKS("lmcache.cuda.openEventAheadChunks"),
        STAGE_IN_POOL_ORDER("lmcache.cuda.stageInPoolOrder"),
        SPIN_US("lmcache.transfer.spinUs"),
        HOST_RUN_KIB("lmcache.transfer.hostRunKiB"),
        NATIVE_HOST_COPY("lmcache.transfer.nativeCopy"),
        PREPARE_THREADS("lmcache.l1.prepareThreads"),
        STACK_LIMIT_BYTES("lmcache.cuda.stackLimitBytes");

        private final String property;

        Knob(String property) {
            this.property = property;
        }

        /** The JVM property that sets this knob. */
        public String property() {
            return property;
        }
    }

    /** The property of each component, in component order (the knobs' properties). */
    public static final List<String> PROPERTIES = Arrays.stream(Knob.values()).map(Knob::property).toList();
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
                (int) in.number(Knob.COPY_BLOCKS, 8, 1, 1024),
                in.number(Knob.STAGING_MIB, 32, 1, 1024) * MIB,
                in.number(Knob.FIRST_BATCH_KIB, 2048, 64, 1 << 20) * KIB,
                in.number(Knob.DMA_HEAD_KIB, 16384, 0, 1 << 24) * KIB,
                in.number(Knob.STORE_DMA_HEAD_MIN_PIECE_KIB, 128, 1, 1 << 20) * KIB,
                in.number(Knob.RETRIEVE_DMA_HEAD_MIN_PIECE_KIB, 256, 1, 1 << 20) * KIB,
                (int) in.number(Knob.BATCH_GROWTH, 2, 2, 64),
                in.flag(Knob.WARM_CONTEXT),
                in.flag(Knob.QUERY_WORKER_EVENT),
                in.flag(Knob.HOST_FN_WAKE),
                (int) in.number(Knob.OPEN_EVENT_AHEAD_CHUNKS, 16, 0, 1 << 20),
                in.flag(Knob.STAGE_IN_POOL_ORDER, false),
                TimeUnit.MICROSECONDS.toNanos(in.number(Knob.SPIN_US, cores >= SPIN_MIN_CORES ? BIG_HOST_SPIN_US : 0, 0, 10_000_000)),
                in.number(Knob.HOST_RUN_KIB, 1024, 4, 1 << 20) * KIB,
                in.flag(Knob.NATIVE_HOST_COPY),
                (int) in.number(Knob.PREPARE_THREADS, 0, 0, 1024),
                in.number(Knob.STACK_LIMIT_BYTES, 256, 0, 1L << 20));
    }

    /** Property name to effective value, in the property's unit (what {@code /config} shows under {@code tuning}). */
    public Map<String, Object> describe() {
        Map<Knob, Object> values = new EnumMap<>(Knob.class);
        values.put(Knob.COPY_BLOCKS, copyKernelBlocks);
        values.put(Knob.STAGING_MIB, stagingHalfBytes / MIB);
        values.put(Knob.FIRST_BATCH_KIB, firstBatchBytes / KIB);
        values.put(Knob.DMA_HEAD_KIB, dmaHeadBytes / KIB);
        values.put(Knob.STORE_DMA_HEAD_MIN_PIECE_KIB, storeDmaHeadMinPieceBytes / KIB);
        values.put(Knob.RETRIEVE_DMA_HEAD_MIN_PIECE_KIB, retrieveDmaHeadMinPieceBytes / KIB);
        values.put(Knob.BATCH_GROWTH, batchGrowth);
        values.put(Knob.WARM_CONTEXT, warmContext);
        values.put(Knob.QUERY_WORKER_EVENT, queryWorkerEvent);
        values.put(Knob.HOST_FN_WAKE, hostFnWake);
        values.put(Knob.OPEN_EVENT_AHEAD_CHUNKS, openEventAheadChunks);
        values.put(Knob.STAGE_IN_POOL_ORDER, stageInPoolOrder);
        values.put(Knob.SPIN_US, TimeUnit.NANOSECONDS.toMicros(transferSpinNs));
        values.put(Knob.HOST_RUN_KIB, hostRunBytes / KIB);
        values.put(Knob.NATIVE_HOST_COPY, nativeHostCopy);
        values.put(Knob.PREPARE_THREADS, prepareThreads);
        values.put(Knob.STACK_LIMIT_BYTES, stackLimitBytes);
        Map<String, Object> out = new LinkedHashMap<>();
        values.forEach((knob, value) -> out.put(knob.property(), value)); // EnumMap: component order
        return out;
    }

    /** Reads the knobs' properties, naming the property in a refusal. */
    private record Reader(UnaryOperator<String> properties) {
        long number(Knob knob, long defaultValue, long min, long max) throws ConfigException {
            String text = properties.apply(knob.property());
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
                throw new ConfigException("-D" + knob.property(), "must be a whole number in [" + min + ", " + max + "], got '"
                        + clip(text) + "'");
            }
            return value;
        }

        boolean flag(Knob knob) throws ConfigException {
            return flag(knob, true);
        }

        boolean flag(Knob knob, boolean defaultValue) throws ConfigException {
            String text = properties.apply(knob.property());
            if (text == null) {
                return defaultValue;
            }
            return switch (text.strip().toLowerCase(Locale.ROOT)) {
                case "true" -> true;
                case "false" -> false;
                default -> throw new ConfigException("-D" + knob.property(), "must be true or false, got '" + clip(text) + "'");
            };
        }

        private static String clip(String text) {
            return text.length() <= 40 ? text : text.substring(0, 40) + "...";
        }
    }
}
