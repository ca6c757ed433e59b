package io.lmcache.server.transfer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.cuda.GpuBackend;
import io.lmcache.server.liveness.EndOfLifeQueue;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.protocol.DType;
import io.lmcache.server.protocol.TensorWrapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Leases: the copy path goes to the end-of-life queue exactly once, after close and the last lease, never inline. */
class InstanceContextTest {
    private final List<String> queued = new ArrayList<>();
    private final List<EndOfLifeQueue.Release> releases = new ArrayList<>();
    private final EndOfLifeQueue queue = (what, release) -> {
        queued.add(what);
        releases.add(release);
        return true;
    };
    private Path segment;
    private InstanceContext context;

    private static ShmSegments shm() {
        return new ShmSegments(false, null, new SegmentMappings(new SegmentMappings.Caps(16, 1L << 30, 65_530)), new ServerMetrics());
    }

    @BeforeEach
    void register() throws IOException, LayoutException {
        segment = Files.createTempFile(Path.of("/dev/shm"), "lmcache_ctx_test_", "");
        Files.write(segment, new byte[4096]);
        TensorWrapper.CpuShm wrapper = new TensorWrapper.CpuShm("/" + segment.getFileName(), 4096, DType.fromTorchName("bfloat16"),
                new long[] {2048}, new long[] {1}, 0, "cpu");
        CopyPath path = new CopyPaths(shm(), null, null, (what, release) -> true, null).open(List.of(wrapper));
        context = new InstanceContext(7, "m", 1, null, path, List.of(wrapper), queue);
    }

    @AfterEach
    void cleanUp() throws Exception {
        for (EndOfLifeQueue.Release release : releases) {
            release.run();
        }
        Files.deleteIfExists(segment);
    }

    @Test
    void closeWithoutLeasesEnqueuesOnce() {
        context.close();
        context.close();
        assertEquals(1, queued.size());
        assertNull(context.acquire(), "a closed context gives no lease");
    }

    @Test
    void theLastReturnedLeaseEnqueues() {
        try (InstanceContext.Lease lease = context.acquire()) {
            context.close();
            assertEquals(0, queued.size(), "not while a transfer holds it");
            assertEquals(1, context.leases());
        }
        assertEquals(1, queued.size());
        assertEquals(0, context.leases());
    }

    @Test
    void aHandedOffLeaseIsReturnedByItsNewOwnerOnly() {
        InstanceContext.Lease owned;
        try (InstanceContext.Lease lease = context.acquire()) {
            owned = lease.handOff();
            assertThrows(IllegalStateException.class, lease::handOff);
        }
        assertEquals(1, context.leases(), "the try's close was a no-op");
        context.close();
        assertEquals(0, queued.size());
        owned.close();
        owned.close();
        assertEquals(1, queued.size());
        assertEquals(0, context.leases());
    }

    @Test
    void cudaTensorsWithoutCudaAreRefusedAtRegisterWithAClearMessage() {
        TensorWrapper.RawCudaIpc cuda = new TensorWrapper.RawCudaIpc(new byte[64], 0, 4096, DType.fromTorchName("bfloat16"),
                new long[] {2048}, new long[] {1}, 0, "00000000-0000-0000-0000-000000000000");
        LayoutException e = assertThrows(LayoutException.class, () -> new CopyPaths(shm(),
                GpuBackend.none(), null, (what, release) -> true, null).open(List.of(cuda)));
        assertTrue(e.getMessage().startsWith("CUDA IPC tensors need the CUDA path"), e.getMessage());
        assertEquals(0, GpuBackend.none().eventPoller().doWork());
    }
}
