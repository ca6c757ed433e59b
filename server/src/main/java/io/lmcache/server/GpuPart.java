package io.lmcache.server;

import io.lmcache.server.agent.AgentErrors;
import io.lmcache.server.agent.AgentRunner;
import io.lmcache.server.agent.CudaEventsAgent;
import io.lmcache.server.agent.Wake;
import io.lmcache.server.config.DeviceMode;
import io.lmcache.server.config.StartupException;
import io.lmcache.server.config.Tuning;
import io.lmcache.server.cuda.CudaException;
import io.lmcache.server.cuda.Direction;
import io.lmcache.server.cuda.GpuBackend;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.metrics.TransferCatalogue;
import io.lmcache.server.storage.L1Pool;
import io.lmcache.server.storage.L1Tier;
import io.lmcache.server.storage.NumaCalls;
import io.lmcache.server.storage.NumaPlacement;
import io.lmcache.server.storage.NumaTopology;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The GPU backend as the wiring sees it: the CUDA backend, or the host-only null object
 * ({@link GpuBackend#none()}) on a host without CUDA. What the server starts, shows and pins
 * differently without a GPU is decided here, from {@link GpuBackend#available()}, and nowhere else.
 */
final class GpuPart {
    private static final Logger LOG = LoggerFactory.getLogger(GpuPart.class);

    private final GpuBackend backend;
    /** What {@link #logPath} says: the open logs nothing, as it runs before the start banner. */
    private final String path;
    /** Whether the copy engines' host functions wake the event poller (its poll is then only the fallback). */
    private final boolean hostFnWake;
    /** Wakes lmcache-cuda-events when a transfer is tracked: made before the backend's poller and the runner, given to both. */
    private final Wake eventsWake;

    private GpuPart(GpuBackend backend, String path, boolean hostFnWake, Wake eventsWake) {
        this.backend = backend;
        this.eventsWake = eventsWake;
        this.path = path;
        this.hostFnWake = hostFnWake;
    }

    /**
     * Opens the CUDA backend, or the host-only one; logs nothing and allocates nothing else, so a refused {@code --device cuda}
     * (a {@link StartupException}: one line, exit 2) leaves no banner and no pool behind.
     */
    static GpuPart open(DeviceMode mode, Tuning tuning) {
        if (mode == DeviceMode.HOST) {
            return new GpuPart(GpuBackend.none(), "host only (--device host): serving CPU shared-memory workers", false, new Wake());
        }
        try {
            // runs on: the thread that submitted the transfer (lmcache-transfer-*)
            Wake eventsWake = new Wake();
            GpuBackend backend = GpuBackend.open(tuning, eventsWake);
            return new GpuPart(backend, "CUDA (" + backend.describe() + "); GPU workers over CUDA IPC, CPU workers over shared memory",
                    tuning.hostFnWake(), eventsWake);
        } catch (CudaException | LinkageError e) {
            if (mode == DeviceMode.CUDA) {
                throw new StartupException("--device cuda", "no usable CUDA driver or GPU on this host (" + LogText.oneLine(e)
                        + "); use --device auto or host to serve CPU workers");
            }
            return new GpuPart(GpuBackend.none(), "host only (CUDA not available: " + e.getMessage() + "); serving CPU shared-memory workers",
                    false, new Wake());
        }
    }

    /**
     * The host-only part of a warm-up's scratch server: its transfers never reach the server's GPU backend (the GPU warm-up's
     * scratch worker copies through the copy path its opener gives), and it pins, places and polls nothing.
     */
    static GpuPart hostOnly() {
        return new GpuPart(GpuBackend.none(), "host only (a warm-up's scratch server)", false, new Wake());
    }

    /** Says in the log which device path the server took (after the start banner). */
    void logPath() {
        LOG.info("device path: {}", path);
    }

    /** What the transfer module opens CUDA tensors and copies with (the null object refuses CUDA tensors). */
    GpuBackend backend() {
        return backend;
    }

    /** The runner of the CUDA event poller (lmcache-cuda-events), not started; null without CUDA (no thread for nothing). */
    AgentRunner eventsRunner(AgentErrors errors) {
        return backend.available() ? CudaEventsAgent.runner(backend.eventPoller(), errors, hostFnWake, eventsWake) : null;
    }

    /** GPU time and bytes of the copies (CUDA hosts only): bytes over seconds is the rate the copies ran at on the GPU. */
    void bindMetrics(ServerMetrics metrics) {
        if (!backend.available()) {
            return;
        }
        for (Direction direction : Direction.values()) {
            String op = direction == Direction.TO_POOL ? "store" : "retrieve";
            // runs on: lmcache-http-* (each scrape); the reset hook below on the /metrics/reset request
            metrics.functionCounter(TransferCatalogue.GPU_COPY_SECONDS, backend, g -> g.copyNanos(direction) / 1e9, op);
            metrics.functionCounter(TransferCatalogue.GPU_COPY_BYTES, backend, g -> g.copyBytes(direction), op);
        }
        metrics.onReset(backend::resetCopyCounters);
    }

    /** {@code /status}'s {@code cuda} field; null (left out) on a host without CUDA. */
    Map<String, Object> status() {
        return backend.available() ? backend.status() : null;
    }

    /** The region stages after prefault: pinning for DMA where there is a GPU. */
    List<L1Pool.RegionStage> regionStages(L1Pool pool) {
        if (!backend.available()) {
            return List.of();
        }
        backend.pinnedPool(pool.regionCount(), pool.regionBytes());
        return List.of(new PinStage(backend));
    }

    /**
     * Where the pool's regions go on a host with several NUMA nodes: on the GPUs' nodes ({@link NumaPlacement}); nothing
     * without CUDA, with {@code --numa-placement off}, or on a one-node host.
     */
    NumaPlacement numaPlacement(L1Pool pool, boolean enabled) {
        if (!backend.available()) {
            return NumaPlacement.none("no GPU: the pool is placed as before");
        }
        return NumaPlacement.plan(enabled, NumaTopology.read(Path.of("/sys")), backend.pciBusIds(), pool.regionCount(), NumaCalls.linux());
    }

    List<String> stageNames() {
        return backend.available() ? List.of("prefault", "pin") : List.of("prefault");
    }

    /** Waits (bounded) for the GPU transfers in flight, running their completions on the closing thread. */
    AutoCloseable drainer() {
        return () -> backend.eventPoller().close();
    }

    /** Closes the backend: transfers in flight finish and the pool is unpinned before its memory goes (close this before {@code l1}). */
    AutoCloseable closer(L1Tier l1) {
        // runs on: the thread that calls LmcacheServer.close()
        return () -> {
            l1.stopPreparation();
            backend.close();
        };
    }

    /** Pins each prepared region for DMA. */
    private record PinStage(GpuBackend backend) implements L1Pool.RegionStage {
        @Override
        public String name() {
            return "pin";
        }

        @Override
        public void prepare(int region, MemorySegment slice) { // runs on: lmcache-pool-prepare
            backend.pin(region, slice);
        }
    }
}
