package io.lmcache.server.warmup;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.config.EvictionPolicyName;
import io.lmcache.server.liveness.Liveness;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.module.LmcacheDrivenTransferModule;
import io.lmcache.server.module.LookupLeases;
import io.lmcache.server.peer.PeerConnections;
import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.DType;
import io.lmcache.server.protocol.LayoutHints;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.TensorWrapper;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.SlabAllocator;
import io.lmcache.server.storage.StoreCounters;
import io.lmcache.server.transfer.CacheGeometry;
import io.lmcache.server.transfer.CopyPaths;
import io.lmcache.server.transfer.LayoutException;
import io.lmcache.server.transfer.ObjectGroupCatalog;
import io.lmcache.server.transfer.SegmentMappings;
import io.lmcache.server.transfer.ShmSegments;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The GPU warm-up's orchestration (issue 30) without a GPU: a fake runner stands in for the CUDA one, and the REGISTERs are
 * real ones of CPU shared-memory workers through the lmcache-driven module, which the test tells the warm-up to warm. What
 * the H200 runs (the CUDA rounds, the pins) is checked there (testclient/gpu/run-on-device.sh).
 */
class GpuWarmupsTest {
    private static final int CHUNK_SIZE = 256;
    private static final long BUDGET_NS = TimeUnit.MILLISECONDS.toNanos(200);
    private static final PeerId PEER = new PeerId("worker".getBytes(StandardCharsets.US_ASCII));

    private final Arena arena = Arena.ofShared();
    private final List<Path> segments = new ArrayList<>();
    private final List<GpuWarmups> warmups = new ArrayList<>();
    private final ServerMetrics metrics = ServerMetrics.scratch();
    private LmcacheDrivenTransferModule module;

    @AfterEach
    void close() throws IOException {
        warmups.forEach(GpuWarmups::close);
        if (module != null) {
            module.close();
        }
        for (Path segment : segments) {
            Files.deleteIfExists(segment);
        }
        arena.close();
    }

    @Test
    void aRegisterWaitsForItsDevicesWarmupWhichRunsOnceForThatDevice() throws IOException {
        AtomicInteger runs = new AtomicInteger();
        GpuWarmups gpu = warmups(BUDGET_NS, (path, budgetNs, stop) -> {
            runs.incrementAndGet();
            assertEquals(BUDGET_NS, budgetNs, "the runner gets the budget");
            return new GpuWarmups.Outcome(7, "budget", 2);
        });
        LmcacheDrivenTransferModule transfers = module(gpu);
        assertSame(Reply.NONE, transfers.register(registration(1), PEER), "the REGISTER reply");
        // no waiting here: the REGISTER returned only once its device's warm-up was done
        Map<String, Object> device = onlyDevice(gpu);
        assertEquals("done", device.get("state"));
        assertEquals(7, device.get("rounds"));
        assertEquals(2, device.get("regions_pinned"));
        assertEquals("budget", device.get("stopped_by"));
        assertSame(Reply.NONE, transfers.register(registration(2), PEER), "a second worker on the same device");
        assertEquals(1, runs.get(), "one warm-up per device");
        assertEquals(1L, gpu.status().get("started"));
        assertEquals(2L, gpu.status().get("registers_waited"));
        assertEquals(0L, gpu.failureCount());
        assertFalse(transfers.objectShapes("warm-model").isEmpty(), "the workers are registered");
    }

    @Test
    void concurrentRegistrationsOnEightDevicesRunOneWarmupEach() throws InterruptedException {
        Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
        GpuWarmups gpu = warmups(BUDGET_NS, (path, budgetNs, stop) -> new GpuWarmups.Outcome(0, "unused", 0));
        List<Thread> lanes = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            String device = "cuda:" + (i % 8); // TP=8, each worker's REGISTER twice (a re-registration with other tensors)
            lanes.add(Thread.ofPlatform().start(() -> gpu.awaitDevice(device, (budgetNs, stop) -> {
                runs.computeIfAbsent(device, d -> new AtomicInteger()).incrementAndGet();
                return new GpuWarmups.Outcome(1, "budget", 0);
            })));
        }
        for (Thread lane : lanes) {
            lane.join(TimeUnit.SECONDS.toMillis(10));
            assertFalse(lane.isAlive(), "every REGISTER returned");
        }
        assertEquals(8, runs.size(), "every device warmed");
        runs.forEach((device, count) -> assertEquals(1, count.get(), device + " warmed once"));
        assertEquals(8L, gpu.status().get("started"));
        assertEquals(16L, gpu.status().get("registers_waited"));
        assertEquals(8, ((List<?>) gpu.status().get("devices")).size());
    }

    @Test
    void aFailingWarmupIsCountedAndTheRegistrationStands() throws IOException {
        GpuWarmups gpu = warmups(BUDGET_NS, (path, budgetNs, stop) -> {
            throw new IllegalStateException("CUDA_ERROR_OUT_OF_MEMORY");
        });
        LmcacheDrivenTransferModule transfers = module(gpu);
        assertSame(Reply.NONE, transfers.register(registration(1), PEER));
        assertFalse(transfers.objectShapes("warm-model").isEmpty(), "the worker is registered");
        assertEquals(1L, gpu.failureCount());
        assertTrue(String.valueOf(onlyDevice(gpu).get("stopped_by")).startsWith("failed: " + IllegalStateException.class.getName()),
                onlyDevice(gpu).toString());
        assertSame(Reply.NONE, transfers.register(registration(2), PEER), "a later REGISTER on the device");
        assertEquals(1L, gpu.failureCount(), "a failed warm-up is not retried");
    }

    @Test
    void aWarmupThatStopsShortOfItsBudgetIsAFailure() throws IOException {
        GpuWarmups gpu = warmups(BUDGET_NS, (path, budgetNs, stop) -> new GpuWarmups.Outcome(3, "a scratch RETRIEVE failed", 2));
        assertSame(Reply.NONE, module(gpu).register(registration(1), PEER));
        assertEquals(1L, gpu.failureCount());
        assertEquals("a scratch RETRIEVE failed", onlyDevice(gpu).get("stopped_by"));
        assertTrue(new GpuWarmups.Outcome(1, "budget", 0).ok());
        assertFalse(new GpuWarmups.Outcome(1, "budget; pinning ahead: region 3: refused", 0).ok(), "a pin that failed counts");
    }

    @Test
    void aWarmupThatOverrunsItsDeadlineDoesNotHoldTheReply() throws IOException {
        CountDownLatch release = new CountDownLatch(1);
        GpuWarmups gpu = warmups(TimeUnit.MILLISECONDS.toNanos(1), (path, budgetNs, stop) -> {
            // a driver call that hangs: the REGISTER waits for it no longer than the budget and the grace
            release.await(1, TimeUnit.MINUTES);
            return new GpuWarmups.Outcome(1, "budget", 0);
        });
        LmcacheDrivenTransferModule transfers = module(gpu);
        assertSame(Reply.NONE, transfers.register(registration(1), PEER), "replied although the warm-up still runs");
        assertEquals(1L, gpu.waitTimeoutCount());
        assertEquals("running", onlyDevice(gpu).get("state"));
        assertFalse(transfers.objectShapes("warm-model").isEmpty());
        release.countDown();
        await().atMost(Duration.ofSeconds(10)).until(() -> "done".equals(onlyDevice(gpu).get("state")));
        assertEquals(0L, gpu.failureCount());
    }

    @Test
    void aZeroBudgetOrAPathItDoesNotWarmRunsNothing() throws IOException {
        AtomicInteger runs = new AtomicInteger();
        GpuWarmups off = warmups(0, (path, budgetNs, stop) -> {
            runs.incrementAndGet();
            return new GpuWarmups.Outcome(0, "budget", 0);
        });
        assertSame(Reply.NONE, module(off).register(registration(1), PEER));
        GpuWarmups cudaOnly = new GpuWarmups(BUDGET_NS, path -> false, (path, budgetNs, stop) -> {
            runs.incrementAndGet();
            return new GpuWarmups.Outcome(0, "budget", 0);
        });
        warmups.add(cudaOnly);
        cudaOnly.afterRegister(null);
        assertEquals(0, runs.get());
        assertEquals(0L, off.status().get("started"));
        assertEquals(0L, GpuWarmups.off().status().get("register_wait_max_ms"));
    }

    @Test
    void aStoppingServerEndsTheWarmupsRounds() {
        AtomicInteger rounds = new AtomicInteger();
        GpuWarmups gpu = warmups(TimeUnit.SECONDS.toNanos(30), (path, budgetNs, stop) -> null);
        Thread lane = Thread.ofPlatform().start(() -> gpu.awaitDevice("cuda:0", (budgetNs, stop) -> {
            while (!stop.requested()) {
                rounds.incrementAndGet();
                Thread.onSpinWait();
            }
            return new GpuWarmups.Outcome(rounds.get(), "stopping", 0);
        }));
        await().atMost(Duration.ofSeconds(10)).until(() -> rounds.get() > 0);
        gpu.close();
        await().atMost(Duration.ofSeconds(10)).until(() -> !lane.isAlive());
        assertEquals("stopping", onlyDevice(gpu).get("stopped_by"));
    }

    @Test
    void theGpuScratchLayoutIsSmallAndTakesBothCopyRoutes() throws LayoutException {
        for (int chunkSize : new int[] {16, 64, 256, 1024, 4096}) {
            ScratchServer.Layout layout = ScratchServer.Layout.gpu(chunkSize);
            assertTrue(layout.tensorBytes() <= 4L << 20, chunkSize + ": a few MiB of device memory, " + layout.tensorBytes());
            assertTrue(layout.poolBytes() <= 32L << 20, chunkSize + ": a few MiB of pinned memory, " + layout.poolBytes());
            assertTrue(layout.objectBytes() * layout.maxChunks() <= layout.regionBytes(), "a round's objects fit a region");
        }
        ScratchServer.Layout usual = ScratchServer.Layout.gpu(256);
        // the scratch worker's REGISTER is one the real planner accepts, with the objects the layout sized the pool for
        CacheGeometry geometry = CacheGeometry.of(ScratchServer.gpuWrappers(usual, "00000000-0000-0000-0000-000000000000"),
                new LayoutHints("NHD", 0, 0, 0), List.of(), 256, true);
        assertEquals(usual.objectBytes(), geometry.largestObjectBytes(), geometry.describe());
        // a chunk's consecutive blocks are one piece of 256 KiB: the batched-copy head's smallest piece by default
        assertEquals(256L << 10, usual.blocksPerChunk() * usual.pieceBytes());
        assertEquals(16L << 10, usual.pieceBytes(), "a single block goes through the staging kernel");
    }

    private GpuWarmups warmups(long budgetNs, GpuWarmups.Runner runner) {
        // the test's workers are CPU ones: every path is warmed here (the server warms CUDA paths only)
        GpuWarmups gpu = new GpuWarmups(budgetNs, path -> true, runner);
        warmups.add(gpu);
        return gpu;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> onlyDevice(GpuWarmups gpu) {
        List<Map<String, Object>> devices = (List<Map<String, Object>>) gpu.status().get("devices");
        assertEquals(1, devices.size(), devices.toString());
        return devices.getFirst();
    }

    /** The lmcache-driven module over a small store, running {@code gpu}'s wait after each successful REGISTER. */
    private LmcacheDrivenTransferModule module(GpuWarmups gpu) {
        ScratchServer.Layout layout = ScratchServer.Layout.host(CHUNK_SIZE);
        long poolBytes = layout.poolBytes();
        ObjectStore store = new ObjectStore(new SlabAllocator(poolBytes, layout.regionBytes()), poolBytes, EvictionPolicyName.LRU,
                TimeUnit.MINUTES.toNanos(1), TimeUnit.MINUTES.toNanos(1), System::nanoTime, new StoreCounters());
        PeerConnections connections = new PeerConnections(System::nanoTime, TimeUnit.MINUTES.toNanos(1));
        Liveness liveness = new Liveness(System::nanoTime, connections, TimeUnit.MINUTES.toNanos(1));
        ShmSegments shm = new ShmSegments(false, new Object(), new SegmentMappings(new SegmentMappings.Caps(4, 1L << 30, 1 << 16)), metrics);
        CopyPaths paths = new CopyPaths(shm, null, arena.allocate(poolBytes, 4096), (what, release) -> {
            try {
                release.run();
            } catch (Exception e) {
                return false;
            }
            return true;
        }, null, null, gpu::afterRegister);
        module = new LmcacheDrivenTransferModule(CHUNK_SIZE, store, new LookupLeases(store, TimeUnit.MINUTES.toNanos(1), System::nanoTime),
                metrics, liveness, paths, new ObjectGroupCatalog(true));
        return module;
    }

    /** A CPU worker's REGISTER of the host warm-up's layout on a segment of its own. */
    private Request.RegisterKvCache registration(long instanceId) throws IOException {
        ScratchServer.Layout layout = ScratchServer.Layout.host(CHUNK_SIZE);
        Path segment = Path.of("/dev/shm", "lmcache_test_gpuwarm_" + ProcessHandle.current().pid() + "_" + instanceId + "_" + System.nanoTime());
        Files.write(segment, new byte[(int) layout.tensorBytes()]);
        segments.add(segment);
        List<TensorWrapper> wrappers = new ArrayList<>();
        for (int layer = 0; layer < layout.layers(); layer++) {
            wrappers.add(new TensorWrapper.CpuShm("/" + segment.getFileName(), layout.tensorBytes(), DType.BFLOAT16, layout.shape(), layout.stride(),
                    0, ""));
        }
        return new Request.RegisterKvCache(instanceId, wrappers, "warm-model", 1, "vllm", new LayoutHints("NHD", 0, 0, 0), List.of());
    }
}
