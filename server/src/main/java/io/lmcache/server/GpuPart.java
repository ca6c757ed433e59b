package io.lmcache.server;

import io.lmcache.server.config.DeviceMode;
import io.lmcache.server.cuda.CudaException;
import io.lmcache.server.cuda.GpuBackend;
import io.lmcache.server.metrics.MetricsBinder;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.storage.L1Pool;
import io.lmcache.server.storage.L1Tier;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The CUDA backend as the wiring sees it. On a host without CUDA there is none, and every "no GPU
 * here" decision of the server is made in this class and nowhere else (a null-object backend
 * turns these checks into plain calls).
 */
final class GpuPart {
    private static final Logger LOG = LoggerFactory.getLogger(GpuPart.class);

    /** Null when this server serves CPU workers only. */
    private final GpuBackend backend;

    private GpuPart(GpuBackend backend) {
        this.backend = backend;
    }

    /** Opens the CUDA backend, or none when this server serves CPU workers only (said in the log either way). */
    static GpuPart open(DeviceMode mode) {
        if (mode == DeviceMode.HOST) {
            LOG.info("device path: host only (--device host): serving CPU shared-memory workers");
            return new GpuPart(null);
        }
        try {
            GpuBackend backend = GpuBackend.open();
            LOG.info("device path: CUDA ({}); GPU workers over CUDA IPC, CPU workers over shared memory", backend.describe());
            return new GpuPart(backend);
        } catch (CudaException | LinkageError e) {
            if (mode == DeviceMode.CUDA) {
                throw new IllegalStateException("--device cuda: no usable CUDA driver or GPU: " + e.getMessage(), e);
            }
            LOG.info("device path: host only (CUDA not available: {}); serving CPU shared-memory workers", e.getMessage());
            return new GpuPart(null);
        }
    }

    /** What the transfer module copies with; null on a host without CUDA. */
    GpuBackend backendOrNull() {
        return backend;
    }

    void bindMetrics(ServerMetrics metrics) {
        if (backend != null) {
            MetricsBinder.bindGpu(metrics, backend);
        }
    }

    /** {@code /status}'s {@code cuda} field; null (left out) on a host without CUDA. */
    Map<String, Object> status() {
        return backend == null ? null : backend.status();
    }

    /** The region stages after prefault: pinning for DMA where there is a GPU. */
    List<L1Pool.RegionStage> regionStages(L1Pool pool) {
        if (backend == null) {
            return List.of();
        }
        backend.pinnedPool(pool.regionCount(), pool.regionBytes());
        return List.of(new PinStage(backend));
    }

    List<String> stageNames() {
        return backend == null ? List.of("prefault") : List.of("prefault", "pin");
    }

    /** Closes the backend: transfers in flight finish and the pool is unpinned before its memory goes (close this before {@code l1}). */
    AutoCloseable closer(L1Tier l1) {
        return () -> {
            if (backend != null) {
                l1.stopPreparation();
                backend.close();
            }
        };
    }

    /** Pins each prepared region for DMA. */
    private record PinStage(GpuBackend backend) implements L1Pool.RegionStage {
        @Override
        public String name() {
            return "pin";
        }

        @Override
        public void prepare(int region, MemorySegment slice) {
            backend.pin(region, slice);
        }
    }
}
