package io.lmcache.server.transfer;

import static io.lmcache.server.transfer.HybridTensors.NHD;
import static io.lmcache.server.transfer.HybridTensors.info;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.protocol.DType;
import io.lmcache.server.protocol.EngineGroupInfo;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Object groups: bucketing by (aux tag, recurrent, window in chunks), segment offsets, formats, and the geometry built on them. */
class ObjectGroupsTest {
    private static final int CHUNK = 256;

    /** Six kernel groups of one shape: full, window 512, recurrent, full, window 300, aux. */
    private static List<KernelGroup> sixKinds() throws LayoutException {
        List<EngineGroupInfo> infos = List.of(info(0, new int[] {0}, 16, -1, false), info(1, new int[] {1}, 16, 512, false),
                info(2, new int[] {2}, 16, 16, true), info(0, new int[] {3}, 16, -1, false), info(3, new int[] {4}, 16, 300, false),
                new EngineGroupInfo(4, new int[] {5}, 16, -1, 1, false));
        return KernelGroups.detect(HybridTensors.tensors(6, DType.BFLOAT16, 2, 64, 16, 2, 64), NHD, infos, CHUNK);
    }

    @Test
    void separatedGroupsBucketByTagRecurrenceAndWindowInFirstKernelOrder() throws Exception {
        List<KernelGroup> kernels = sixKinds();
        List<ObjectGroup> groups = ObjectGroups.bucket(kernels, CHUNK, true);
        assertEquals(4, groups.size());
        assertArrayEquals(new int[] {0, 3}, indices(groups.get(0)));
        assertEquals(-1, groups.get(0).windowChunks());
        assertArrayEquals(new int[] {1, 4}, indices(groups.get(1)), "windows of 512 and 300 tokens are both 2 chunks");
        assertEquals(2, groups.get(1).windowChunks());
        assertArrayEquals(new int[] {2}, indices(groups.get(2)));
        assertEquals(GroupKind.RECURRENT, groups.get(2).kind());
        assertEquals(1, groups.get(2).windowChunks());
        assertEquals(GroupKind.AUX, groups.get(3).kind());
        ObjectGroup full = groups.get(0);
        assertArrayEquals(new long[] {0, kernels.get(0).segmentBytes()}, full.segmentOffsets());
        assertEquals(kernels.get(0).segmentBytes() + kernels.get(3).segmentBytes(), full.objectBytes());
        assertEquals(kernels.get(2).layout().segmentBytes(1), groups.get(2).objectBytes(), "a recurrent object holds one block per layer");
        assertEquals(groups.get(0).format(), groups.get(1).format(), "the same segments: the key's object group tells them apart");
        assertTrue(groups.get(0).format() < 0, "a multi-kernel format never equals a plain one");
        assertNotEquals(kernels.get(2).layout().format(), groups.get(2).format(), "a snapshot object is not a whole-chunk object");
    }

    /** One object per chunk for all groups would store null-block "state" of a Mamba group: such a registration is refused. */
    @Test
    void recurrentGroupsWithoutSeparationAreRefusedAtRegister() throws Exception {
        int n = 544;
        LayoutException refused = assertThrows(LayoutException.class,
                () -> CacheGeometry.of(HybridTensors.qwenTensors(16, n), NHD, HybridTensors.qwenInfos(n), n, false));
        assertTrue(refused.getMessage().contains("--no-separate-object-groups"), refused.getMessage());
        assertEquals(2, CacheGeometry.of(HybridTensors.qwenTensors(16, n), NHD, HybridTensors.qwenInfos(n), n, true).objects().size());
        // attention-only hybrids (windows) may still share one object group
        assertEquals(1, CacheGeometry.of(HybridTensors.gemmaTensors(64), NHD, HybridTensors.gemmaInfos(), 256, false).objects().size());
    }

    @Test
    void withoutSeparationEverythingIsOneFullAttentionGroup() throws Exception {
        List<KernelGroup> kernels = sixKinds();
        List<ObjectGroup> groups = ObjectGroups.bucket(kernels, CHUNK, false);
        assertEquals(1, groups.size());
        assertEquals(-1, groups.getFirst().windowChunks());
        assertEquals(GroupKind.ATTENTION, groups.getFirst().kind());
        assertArrayEquals(new int[] {0, 1, 2, 3, 4, 5}, indices(groups.getFirst()));
        assertEquals(kernels.stream().mapToLong(KernelGroup::segmentBytes).sum(), groups.getFirst().objectBytes());
    }

    @Test
    void aLoneWholeChunkGroupKeepsThePlainFormat() throws Exception {
        List<KernelGroup> kernels = KernelGroups.detect(HybridTensors.tensors(2, DType.BFLOAT16, 2, 64, 16, 2, 64), NHD, List.of(), CHUNK);
        ObjectGroup group = ObjectGroups.bucket(kernels, CHUNK, true).getFirst();
        assertEquals(kernels.getFirst().layout().format(), group.format(), "the objects the engine-driven path shares");
        assertEquals(kernels.getFirst().layout().objectBytes(CHUNK), group.objectBytes());
    }

    @Test
    void geometryReportsCacheSizePerTokenAndTheLookupWindows() throws Exception {
        CacheGeometry gemma = CacheGeometry.of(HybridTensors.gemmaTensors(64), NHD, HybridTensors.gemmaInfos(), CHUNK, true);
        long perToken = gemma.objects().stream().mapToLong(ObjectGroup::objectBytes).sum() / CHUNK;
        assertEquals(perToken, gemma.cacheSizePerToken(CHUNK));
        // per token: sliding 2 planes x 2 layers x 256 dims x 2 bytes, full 2 x 2 x 512 x 2
        assertEquals(2 * 2 * 256 * 2 + 2 * 2 * 512 * 2, gemma.cacheSizePerToken(CHUNK));
        LookupGeometry lookup = gemma.lookupGeometry();
        assertArrayEquals(new int[] {4, -1}, lookup.windowChunks());
        assertTrue(!lookup.plain());
        assertArrayEquals(new int[] {0, 1}, gemma.objectGroupOfKernel());
        assertTrue(gemma.hybrid());
        assertTrue(gemma.builtFrom(HybridTensors.gemmaInfos()));
        assertTrue(!gemma.builtFrom(List.of()), "a re-REGISTER without groups is another registration");
        assertTrue(!gemma.builtFrom(List.of(HybridTensors.gemmaInfos().get(1), HybridTensors.gemmaInfos().get(0))));
        CacheGeometry merged = CacheGeometry.of(HybridTensors.gemmaTensors(64), NHD, HybridTensors.gemmaInfos(), CHUNK, false);
        assertTrue(merged.lookupGeometry().plain(), "one merged group is looked up as full attention");
        assertEquals(gemma.cacheSizePerToken(CHUNK), merged.cacheSizePerToken(CHUNK));
    }

    @Test
    void nonPowerOfTwoChunksMakeNonPowerOfTwoObjects() throws Exception {
        for (int n : new int[] {544, 784, 944}) {
            CacheGeometry qwen = CacheGeometry.of(HybridTensors.qwenTensors(8, n), NHD, HybridTensors.qwenInfos(n), n, true);
            assertEquals(2, qwen.objects().size());
            assertEquals(3L * 2 * n * 96 * 2, qwen.objects().get(0).objectBytes(), "three Mamba layers, one snapshot each");
            assertEquals(2L * n * 256 * 2, qwen.objects().get(1).objectBytes());
            assertTrue(Long.bitCount(qwen.objects().get(1).objectBytes()) > 1);
        }
    }

    private static int[] indices(ObjectGroup group) {
        return group.kernels().stream().mapToInt(KernelGroup::index).toArray();
    }
}
