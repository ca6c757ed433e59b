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
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.RequestConfigs;
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
 * The GPU warm-up's orchestration (issues 30 and 52) without a GPU: a fake runner stands in for the CUDA one, and the REGISTERs are
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
    void aRegisterStartsItsDevicesWarmupWithoutWaitingForItAndItRunsOnceForThatDevice() throws Exception {
        AtomicInteger runs = new AtomicInteger();
        CountDownLatch release = new CountDownLatch(1);
        GpuWarmups gpu = warmups(BUDGET_NS, (worker, budgetNs, stop) -> {
            runs.incrementAndGet();
            assertEquals(BUDGET_NS, budgetNs, "the runner gets the budget");
            assertEquals(1L, worker.instanceId(), "the runner gets the registration that started it");
            release.await(1, TimeUnit.MINUTES); // a warm-up still running when the REGISTER replies
            return new GpuWarmups.Outcome(7, "budget", 2, 42);
        });
        assertEquals("idle", gpu.status().get("state"), "no GPU REGISTER yet");
        LmcacheDrivenTransferModule transfers = module(gpu);
        assertSame(Reply.NONE, transfers.register(registration(1), PEER), "the REGISTER reply");
        assertEquals("running", gpu.status().get("state"), "the reply did not wait for the warm-up");
        assertEquals("running", onlyDevice(gpu).get("state"));
        assertSame(Reply.NONE, transfers.register(registration(2), PEER), "a second worker on the same device");
        release.countDown();
        assertTrue(gpu.awaitEnd("cpu", TimeUnit.SECONDS.toNanos(10)));
        Map<String, Object> device = onlyDevice(gpu);
        assertEquals("done", device.get("state"));
        assertEquals(7, device.get("rounds"));
        assertEquals(2, device.get("regions_pinned"));
        assertEquals(42L, device.get("pool_pin_wait_ms"), "how long the rounds waited for the pool's pinning");
        assertEquals("budget", device.get("stopped_by"));
        assertEquals(1, runs.get(), "one warm-up per device");
        Map<String, Object> status = gpu.status();
        assertEquals("done", status.get("state"));
        assertEquals(1L, status.get("count"));
        assertTrue((Long) status.get("last_ms") >= 0, status.toString());
        assertEquals(0L, gpu.failureCount());
        assertFalse(transfers.objectShapes("warm-model").isEmpty(), "the workers are registered");
    }

    @Test
    void aWorkersFirstTransferMakesTheRunningWarmupYield() throws Exception {
        AtomicInteger rounds = new AtomicInteger();
        GpuWarmups gpu = warmups(TimeUnit.SECONDS.toNanos(30), (worker, budgetNs, stop) -> {
            while (!stop.requested()) { // rounds until told: the server stopping or, here, a worker's STORE
                rounds.incrementAndGet();
                Thread.sleep(1);
            }
            return new GpuWarmups.Outcome(rounds.get(), "stopping", 1);
        });
        LmcacheDrivenTransferModule transfers = module(gpu);
        assertSame(Reply.NONE, transfers.register(registration(1), PEER));
        assertSame(Reply.NONE, transfers.register(registration(2), PEER), "registered while the warm-up runs");
        await().atMost(Duration.ofSeconds(10)).until(() -> rounds.get() > 0);
        assertEquals("running", onlyDevice(gpu).get("state"));
        Reply stored = transfers.store(store(2), PEER); // the second worker's: every worker on the device counts
        assertTrue(stored instanceof Reply.Transfer transfer && transfer.ok(), "the STORE went through: " + stored);
        assertTrue(gpu.awaitEnd("cpu", TimeUnit.SECONDS.toNanos(10)), "the warm-up yielded to the STORE");
        Map<String, Object> device = onlyDevice(gpu);
        assertEquals("yielded", device.get("state"));
        assertEquals("yielded", device.get("stopped_by"));
        assertEquals(1, device.get("regions_pinned"), "what it pinned ahead stays pinned");
        assertEquals("yielded", gpu.status().get("state"));
        assertEquals(1L, gpu.yieldCount());
        assertEquals(0L, gpu.failureCount(), "a yield is no failure");
    }

    @Test
    void withARegisterWaitTheReplyComesAfterTheWarmupOrAtTheWaitsEnd() throws Exception {
        GpuWarmups waits = new GpuWarmups(BUDGET_NS, TimeUnit.SECONDS.toNanos(30), path -> true,
                (worker, budgetNs, stop) -> new GpuWarmups.Outcome(3, "budget", 1));
        warmups.add(waits);
        assertSame(Reply.NONE, module(waits).register(registration(1), PEER));
        // --gpu-warmup-register-wait-ms: the REGISTER returned only once its device's warm-up was done
        assertEquals("done", onlyDevice(waits).get("state"));
        assertEquals(1L, waits.status().get("registers_waited"));
        module.close();
        module = null;
        CountDownLatch release = new CountDownLatch(1);
        GpuWarmups bounded = new GpuWarmups(BUDGET_NS, TimeUnit.MILLISECONDS.toNanos(1), path -> true, (worker, budgetNs, stop) -> {
            release.await(1, TimeUnit.MINUTES); // a driver call that hangs: the wait ends at its bound
            return new GpuWarmups.Outcome(1, "budget", 0);
        });
        warmups.add(bounded);
        assertSame(Reply.NONE, module(bounded).register(registration(2), PEER), "replied although the warm-up still runs");
        assertEquals("running", onlyDevice(bounded).get("state"));
        release.countDown();
        assertTrue(bounded.awaitEnd("cpu", TimeUnit.SECONDS.toNanos(10)));
    }

    @Test
    void concurrentRegistrationsOnEightDevicesRunOneWarmupEach() throws InterruptedException {
        Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();
        GpuWarmups gpu = warmups(BUDGET_NS, (worker, budgetNs, stop) -> new GpuWarmups.Outcome(0, "unused", 0));
        List<Thread> lanes = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            String device = "cuda:" + (i % 8); // TP=8, each worker's REGISTER twice (a re-registration with other tensors)
            lanes.add(Thread.ofPlatform().start(() -> gpu.startDevice(device, null, (budgetNs, stop) -> {
                runs.computeIfAbsent(device, d -> new AtomicInteger()).incrementAndGet();
                return new GpuWarmups.Outcome(1, "budget", 0);
            })));
        }
        for (Thread lane : lanes) {
            lane.join(TimeUnit.SECONDS.toMillis(10));
            assertFalse(lane.isAlive(), "every REGISTER returned");
        }
        for (int i = 0; i < 8; i++) {
            assertTrue(gpu.awaitEnd("cuda:" + i, TimeUnit.SECONDS.toNanos(10)));
        }
        assertEquals(8, runs.size(), "every device warmed");
        runs.forEach((device, count) -> assertEquals(1, count.get(), device + " warmed once"));
        assertEquals(8L, gpu.status().get("count"));
        assertEquals(8, ((List<?>) gpu.status().get("devices")).size());
    }

    @Test
    void aFailingWarmupIsCountedAndTheRegistrationStands() throws Exception {
        GpuWarmups gpu = warmups(BUDGET_NS, (worker, budgetNs, stop) -> {
            throw new IllegalStateException("CUDA_ERROR_OUT_OF_MEMORY");
        });
        LmcacheDrivenTransferModule transfers = module(gpu);
        assertSame(Reply.NONE, transfers.register(registration(1), PEER));
        assertFalse(transfers.objectShapes("warm-model").isEmpty(), "the worker is registered");
        assertTrue(gpu.awaitEnd("cpu", TimeUnit.SECONDS.toNanos(10)));
        assertEquals(1L, gpu.failureCount());
        assertEquals("failed", gpu.status().get("state"));
        assertTrue(String.valueOf(onlyDevice(gpu).get("stopped_by")).startsWith("failed: " + IllegalStateException.class.getName()),
                onlyDevice(gpu).toString());
        assertSame(Reply.NONE, transfers.register(registration(2), PEER), "a later REGISTER on the device");
        assertEquals(1L, gpu.failureCount(), "a failed warm-up is not retried");
        assertEquals(1L, gpu.startedCount());
    }

    @Test
    void aWarmupThatStopsShortOfItsBudgetIsAFailure() throws Exception {
        GpuWarmups gpu = warmups(BUDGET_NS, (worker, budgetNs, stop) -> new GpuWarmups.Outcome(3, "a scratch RETRIEVE failed", 2));
        assertSame(Reply.NONE, module(gpu).register(registration(1), PEER));
        assertTrue(gpu.awaitEnd("cpu", TimeUnit.SECONDS.toNanos(10)));
        assertEquals(1L, gpu.failureCount());
        assertEquals("a scratch RETRIEVE failed", onlyDevice(gpu).get("stopped_by"));
        assertTrue(new GpuWarmups.Outcome(1, "budget", 0).ok());
        assertTrue(new GpuWarmups.Outcome(1, "yielded", 0).ok());
        assertFalse(new GpuWarmups.Outcome(1, "budget; pinning ahead: region 3: refused", 0).ok(), "a pin that failed counts");
    }

    @Test
    void theRoundsWaitForThePoolsPinningUntilItEndsAWorkerComesOrTheirLatestStart() {
        AtomicInteger asked = new AtomicInteger();
        long untilNs = System.nanoTime() + TimeUnit.MINUTES.toNanos(1);
        GpuScratchWarmup.awaitPoolPinned(deadlineNs -> {
            assertTrue(deadlineNs - untilNs <= 0, "never asked to wait past the latest start");
            return asked.incrementAndGet() == 3; // the pinning ends at the third look
        }, untilNs, () -> false);
        assertEquals(3, asked.get(), "waited until the pinning ended");
        asked.set(0);
        AtomicInteger looks = new AtomicInteger();
        GpuScratchWarmup.awaitPoolPinned(deadlineNs -> {
            asked.incrementAndGet();
            return false;
        }, untilNs, () -> looks.incrementAndGet() > 2);
        assertEquals(2, asked.get(), "a worker's transfer ends the wait at the next look");
        asked.set(0);
        GpuScratchWarmup.awaitPoolPinned(deadlineNs -> asked.incrementAndGet() < 0, System.nanoTime() - 1, () -> false);
        assertEquals(0, asked.get(), "no wait once the latest start has passed");
        // a pinning not begun answers false at once: the wait looks once per slice (10 ms) instead of spinning on it
        asked.set(0);
        GpuScratchWarmup.awaitPoolPinned(deadlineNs -> asked.incrementAndGet() < 0, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(100),
                () -> false);
        assertTrue(asked.get() >= 1 && asked.get() <= 20, "about one look per slice, not a spin: " + asked.get());
    }

    @Test
    void aZeroBudgetOrAPathItDoesNotWarmRunsNothing() throws IOException {
        AtomicInteger runs = new AtomicInteger();
        GpuWarmups off = warmups(0, (worker, budgetNs, stop) -> {
            runs.incrementAndGet();
            return new GpuWarmups.Outcome(0, "budget", 0);
        });
        assertSame(Reply.NONE, module(off).register(registration(1), PEER));
        GpuWarmups cudaOnly = new GpuWarmups(BUDGET_NS, path -> false, (worker, budgetNs, stop) -> {
            runs.incrementAndGet();
            return new GpuWarmups.Outcome(0, "budget", 0);
        });
        warmups.add(cudaOnly);
        cudaOnly.afterRegister(null);
        assertEquals(0, runs.get());
        assertEquals(0L, off.status().get("count"));
        assertEquals("off", off.status().get("state"), "--gpu-warmup-budget-ms 0");
        assertEquals("off", GpuWarmups.off().status().get("state"));
        assertEquals("idle", cudaOnly.status().get("state"));
    }

    @Test
    void aStoppingServerEndsTheWarmupsRounds() throws InterruptedException {
        AtomicInteger rounds = new AtomicInteger();
        GpuWarmups gpu = warmups(TimeUnit.SECONDS.toNanos(30), (worker, budgetNs, stop) -> null);
        gpu.startDevice("cuda:0", null, (budgetNs, stop) -> {
            while (!stop.requested()) {
                rounds.incrementAndGet();
                Thread.onSpinWait();
            }
            return new GpuWarmups.Outcome(rounds.get(), "stopping", 0);
        });
        await().atMost(Duration.ofSeconds(10)).until(() -> rounds.get() > 0);
        gpu.close();
        assertTrue(gpu.awaitEnd("cuda:0", TimeUnit.SECONDS.toNanos(10)));
        assertEquals("stopping", onlyDevice(gpu).get("stopped_by"), "a stop is no yield");
        assertEquals(0L, gpu.yieldCount());
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
        for (int region = 0; region < layout.regions(); region++) {
            store.addReadyRegion(region); // room for a worker's STORE
        }
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

    /** A STORE of one chunk from {@code instanceId}'s first blocks. */
    private static Request.Store store(long instanceId) {
        ScratchServer.Layout layout = ScratchServer.Layout.host(CHUNK_SIZE);
        int[] tokens = new int[CHUNK_SIZE];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = i + 1;
        }
        int[] blocks = new int[layout.blocksPerChunk()];
        for (int i = 0; i < blocks.length; i++) {
            blocks[i] = i;
        }
        CacheKey key = new CacheKey("warm-model", 1, 0, tokens, 0, CHUNK_SIZE, "warm-request", "", 1, RequestConfigs.NONE);
        return new Request.Store(key, instanceId, new int[][] {blocks}, new byte[64]);
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
