package io.lmcache.server.storage;

import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.BitSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.Locale;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * NUMA placement of the pool, host-only: the topology from a fake sysfs tree, the decision (one node, off, GPUs without a
 * node, several nodes), the fallback from a refused mbind to first touch and to nothing, and the placement running on the
 * preparation thread before each region's prefault.
 */
class NumaPlacementTest {
    private static final String GPU0 = "0000:18:00.0";
    private static final String GPU1 = "0000:9A:00.0"; // CUDA's case; sysfs names it in lowercase

    @TempDir
    Path sysfs;

    /** Records the calls; refuses mbind and/or thread binding with the given errno (0: allow). */
    private static final class FakeCalls implements NumaCalls {
        final int mbindErrno;
        final int bindErrno;
        final ConcurrentMap<Integer, Integer> mbindNodeByRegionStart = new ConcurrentHashMap<>();
        final ConcurrentMap<String, BitSet> boundThreads = new ConcurrentHashMap<>();
        MemorySegment base;

        FakeCalls(int mbindErrno, int bindErrno) {
            this.mbindErrno = mbindErrno;
            this.bindErrno = bindErrno;
        }

        @Override
        public int preferNode(MemorySegment range, int node) {
            if (mbindErrno == 0 && base != null) {
                mbindNodeByRegionStart.put((int) (range.address() - base.address()), node);
            }
            return mbindErrno;
        }

        @Override
        public int bindThread(BitSet cpus) {
            if (bindErrno == 0) {
                boundThreads.put(Thread.currentThread().getName(), (BitSet) cpus.clone());
            }
            return bindErrno;
        }
    }

    private void node(int node, String cpus) throws IOException {
        Path dir = Files.createDirectories(sysfs.resolve("devices/system/node/node" + node));
        Files.writeString(dir.resolve("cpulist"), cpus + "\n");
    }

    private void gpu(String busId, String node) throws IOException {
        Path dir = Files.createDirectories(sysfs.resolve("bus/pci/devices/" + busId.toLowerCase(Locale.ROOT)));
        Files.writeString(dir.resolve("numa_node"), node + "\n");
    }

    private void twoSockets() throws IOException {
        node(0, "0-3,8-11");
        node(1, "4-7,12-15");
        gpu(GPU0, "0");
        gpu(GPU1, "1");
    }

    @Test
    void theTopologyIsReadFromSysfs() throws IOException {
        twoSockets();
        NumaTopology topology = NumaTopology.read(sysfs);
        assertEquals(2, topology.nodeCount());
        assertEquals(BitSet.valueOf(new long[] {0x0f0f}), topology.nodeCpus().get(0));
        assertEquals(0, topology.gpuNode(GPU0));
        assertEquals(1, topology.gpuNode(GPU1));
        assertEquals(1, topology.gpuNode("00000000:9a:00.0"), "nvidia-smi's 8-digit domain");
        assertEquals(-1, topology.gpuNode("0000:3b:00.0"), "no such device");
        assertEquals(-1, topology.gpuNode("../../../etc/passwd"), "never a path from a non-id");
        assertEquals(BitSet.valueOf(new long[] {0b1011}), NumaTopology.parseCpuList("0-1,3,x-2,9-4,"));
    }

    @Test
    void oneNodeOrOffOrNoGpuNodePlacesNothing() throws IOException {
        node(0, "0-15");
        gpu(GPU0, "-1"); // what a one-node host writes
        FakeCalls calls = new FakeCalls(0, 0);
        NumaPlacement oneNode = NumaPlacement.plan(true, NumaTopology.read(sysfs), List.of(GPU0), 4, calls);
        assertEquals(NumaPlacement.Method.NONE, oneNode.method());
        assertTrue(((String) oneNode.status(4).get("message")).contains("one NUMA node"));
        assertEquals(List.of(-1, -1, -1, -1), oneNode.status(4).get("region_nodes"));

        node(1, "16-31");
        NumaPlacement noGpuNode = NumaPlacement.plan(true, NumaTopology.read(sysfs), List.of(GPU0, ""), 4, calls);
        assertEquals(NumaPlacement.Method.NONE, noGpuNode.method());
        gpu(GPU0, "1");
        NumaPlacement off = NumaPlacement.plan(false, NumaTopology.read(sysfs), List.of(GPU0), 4, calls);
        assertEquals(NumaPlacement.Method.NONE, off.method());
        assertTrue(calls.boundThreads.isEmpty() && calls.mbindNodeByRegionStart.isEmpty(), "nothing was called");
    }

    @Test
    void severalNodesPutEachRegionOnAGpusNodeByMbindBeforeItsFirstTouch() throws IOException {
        twoSockets();
        FakeCalls calls = new FakeCalls(0, 0);
        Map<Integer, Integer> nodes = prepare(calls, 6);
        assertEquals(Map.of(0, 0, 1, 1, 2, 0, 3, 1, 4, 0, 5, 1), nodes);
        assertTrue(calls.boundThreads.isEmpty(), "mbind allowed: no thread is bound");
    }

    @Test
    void aRefusedMbindFallsBackToFirstTouchFromBoundThreads() throws IOException {
        twoSockets();
        FakeCalls calls = new FakeCalls(NumaCalls.EPERM, 0);
        NumaPlacement placement = NumaPlacement.plan(true, NumaTopology.read(sysfs), List.of(GPU0, GPU1), 4, calls);
        try (L1Pool pool = L1Pool.open("", 4 * REGION, REGION)) {
            Set<String> stagedOn = ConcurrentHashMap.newKeySet();
            pool.startPreparation(List.of(recordingStage(stagedOn)), region -> { }, placement, 0);
            await().atMost(Duration.ofSeconds(10)).until(() -> pool.preparedRegions() == 4);
            assertEquals(NumaPlacement.Method.FIRST_TOUCH, placement.method());
            assertTrue(((String) placement.status(4).get("message")).contains("CAP_SYS_NICE"));
            assertTrue(calls.boundThreads.keySet().containsAll(stagedOn), "every preparation thread bound itself: " + calls.boundThreads);
            assertTrue(calls.boundThreads.keySet().stream().noneMatch(name -> name.equals(Thread.currentThread().getName())),
                    "the start-up thread keeps its CPUs");
            assertEquals(List.of(0, 1, 0, 1), pool.numaStatus().get("region_nodes"));
        }
    }

    @Test
    void neitherCallAllowedPlacesNothing() throws IOException {
        twoSockets();
        FakeCalls calls = new FakeCalls(NumaCalls.EPERM, NumaCalls.EPERM);
        NumaPlacement placement = NumaPlacement.plan(true, NumaTopology.read(sysfs), List.of(GPU0, GPU1), 2, calls);
        placement.probe(region -> MemorySegment.NULL);
        assertEquals(NumaPlacement.Method.NONE, placement.method());
        assertEquals(List.of(-1, -1), placement.status(2).get("region_nodes"));
    }

    private static final long REGION = 64 << 10;

    private static L1Pool.RegionStage recordingStage(Set<String> threads) {
        return new L1Pool.RegionStage() {
            @Override
            public String name() {
                return "record";
            }

            @Override
            public void prepare(int region, MemorySegment slice) {
                threads.add(Thread.currentThread().getName());
            }
        };
    }

    /** Prepares a pool of {@code regions} with the placement; the node each region was mbound to, by region. */
    private Map<Integer, Integer> prepare(FakeCalls calls, int regions) throws IOException {
        NumaPlacement placement = NumaPlacement.plan(true, NumaTopology.read(sysfs), List.of(GPU0, GPU1), regions, calls);
        try (L1Pool pool = L1Pool.open("", regions * REGION, REGION)) {
            calls.base = pool.segment();
            pool.startPreparation(List.of(recordingStage(ConcurrentHashMap.newKeySet())), region -> { }, placement, 0);
            await().atMost(Duration.ofSeconds(10)).until(() -> pool.preparedRegions() == regions);
            assertEquals(NumaPlacement.Method.MBIND, placement.method());
            Map<Integer, Integer> byRegion = new TreeMap<>();
            calls.mbindNodeByRegionStart.forEach((offset, node) -> byRegion.put((int) (offset / REGION), node));
            return byRegion;
        }
    }
}
