package io.lmcache.server.transfer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.protocol.EngineGroupInfo;
import io.lmcache.server.protocol.LayoutHints;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** SGLang's flat pool list (LMCache's SGLang detector) and its padding page: the layout, the pieces, the refusals. */
class SglangLayoutsTest {
    private static final LayoutHints PAGE_16 = new LayoutHints("", 0, 16, 0);

    private static CacheGeometry geometry(int tensors, long... shape) throws LayoutException {
        return CacheGeometry.of(LayoutDetectorTest.layers(tensors, shape), PAGE_16, List.of(), 256, true, "sglang");
    }

    @Test
    void kThenVPoolsAreTwoPlanesOfHalfAsManyLayers() throws LayoutException {
        KvLayout layout = geometry(6, 16 * 33, 4, 32).firstLayout();
        assertEquals(KvLayout.Kind.SGLANG_MHA, layout.kind());
        assertEquals(3, layout.numLayers());
        assertEquals(2, layout.planes());
        assertEquals(33, layout.numBlocks());
        assertEquals(16, layout.blockSize());
        assertEquals(16L * 4 * 32 * 2, layout.pieceBytes());
        // K of layer 1 is tensor 1, V of layer 1 is tensor 4; page 2 starts 2 pages into either
        assertEquals(1, layout.tensorIndex(1, 0));
        assertEquals(4, layout.tensorIndex(1, 1));
        assertEquals(2 * layout.pieceBytes(), layout.pieceOffset(1, 1, 2));
    }

    @Test
    void piecesOfAChunkComeFromTheKPoolsThenTheVPools() throws LayoutException {
        KvLayout layout = geometry(4, 16 * 40, 2, 8).firstLayout();
        List<int[]> tensorsAndObjectOffsets = new ArrayList<>();
        int[] pages = new int[16];
        for (int i = 0; i < pages.length; i++) {
            pages[i] = 1 + i;
        }
        PiecePlanner.chunk(layout, pages, 0, 16, 0, 0, new PieceSink() {
            @Override
            public void piece(int tensor, long tensorOffset, long objectOffset, long length) {
                tensorsAndObjectOffsets.add(new int[] {tensor, (int) tensorOffset, (int) objectOffset, (int) length});
            }
        });
        // one run of 16 adjacent pages per (plane, layer): K0, K1, V0, V1, in the object's [plane][layer] order
        assertEquals(4, tensorsAndObjectOffsets.size());
        long run = 16 * layout.pieceBytes();
        for (int i = 0; i < 4; i++) {
            int[] piece = tensorsAndObjectOffsets.get(i);
            assertEquals(i, piece[0], "tensor");
            assertEquals(layout.pieceBytes(), piece[1], "page 1 of the pool");
            assertEquals(i * run, piece[2], "object offset");
            assertEquals(run, piece[3]);
        }
    }

    @Test
    void oneHeadPoolsAreMlaLayers() throws LayoutException {
        KvLayout layout = geometry(3, 16 * 9, 1, 96).firstLayout();
        assertEquals(KvLayout.Kind.SGLANG_MLA, layout.kind());
        assertEquals(3, layout.numLayers());
        assertEquals(1, layout.planes());
        assertEquals(2, layout.tensorIndex(2, 0));
    }

    @Test
    void whatLmcachesDetectorWouldNotTakeIsRefusedWithItsReason() {
        assertTrue(assertThrows(LayoutException.class, () -> geometry(5, 16 * 4, 4, 32)).getMessage().contains("even number"));
        assertTrue(assertThrows(LayoutException.class, () -> geometry(4, 16 * 4 + 3, 4, 32)).getMessage().contains("multiple"));
        assertThrows(LayoutException.class,
                () -> CacheGeometry.of(LayoutDetectorTest.layers(4, 64, 4, 32), LayoutHints.NONE, List.of(), 256, true, "sglang"));
        assertThrows(LayoutException.class, () -> CacheGeometry.of(LayoutDetectorTest.layers(4, 64, 4, 32), PAGE_16,
                List.of(EngineGroupInfo.of(0, new int[] {0, 1, 2, 3})), 256, true, "sglang"));
        assertThrows(LayoutException.class, () -> geometry(4, 2, 16 * 4, 4, 32));
    }

    @Test
    void thePaddingPageIsNeverCopied() throws LayoutException {
        KernelGroup kernel = geometry(2, 16 * 40, 2, 8).kernels().getFirst();
        int[] store = {1, 2, 0, 4};
        assertTrue(NullPages.check(kernel, store, 4, 0, true).contains("STORE"));
        assertNull(NullPages.check(kernel, new int[] {1, 2, 3, 4}, 4, 0, true));
        // RETRIEVE: leading placeholders are skipped whatever the skip says; one after a real page refuses
        int[] placeholders = {0, 0, 0, 7};
        assertNull(NullPages.check(kernel, placeholders, 4, 3, false));
        assertTrue(NullPages.check(kernel, new int[] {0, 5, 0, 7}, 4, 1, false).contains("RETRIEVE"));
        CacheGeometry g = geometry(2, 16 * 40, 2, 8);
        assertEquals(48, NullPages.retrieveSkip(g, new int[][] {placeholders}, 3), "3 pages, not 3 tokens");
        assertEquals(50, NullPages.retrieveSkip(g, new int[][] {placeholders}, 50));
    }

    @Test
    void vllmRegistrationsKeepTheirRules() throws LayoutException {
        KernelGroup kernel = CacheGeometry.of(LayoutDetectorTest.layers(2, 2, 40, 16, 2, 8), LayoutHints.NONE, List.of(), 256, true)
                .kernels().getFirst();
        assertNull(NullPages.check(kernel, new int[] {0, 0, 1}, 3, 0, true), "vLLM's block 0 is a real block for a non-hybrid client");
    }
}
