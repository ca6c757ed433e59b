package io.lmcache.server.transfer;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.lmcache.server.protocol.DType;
import io.lmcache.server.protocol.EngineGroupInfo;
import org.junit.jupiter.api.Test;

/** RETRIEVE's skip_first_n_tokens for groups that keep only the last blocks of a chunk (§A.3.4). */
class SkipRuleTest {

    @Test
    void blocksToSkipFollowLmcachesFormula() {
        // 4 blocks per chunk, the last 2 kept: skipping 0..3 blocks of chunk 0 skips max(0, k - 2) kept ones, then 2 per whole chunk
        int[] expected = {0, 0, 0, 1, 2, 2, 2, 3, 4};
        for (int skipped = 0; skipped < expected.length; skipped++) {
            assertEquals(expected[skipped], SkipRule.keptBlocksToSkip(skipped, 4, 2), "skipped " + skipped);
        }
        assertEquals(5, SkipRule.keptBlocksToSkip(5, 4, 4), "a group that keeps every block skips what was asked");
    }

    @Test
    void recurrentGroupsSkipWholeSnapshotsAttentionGroupsRows() throws Exception {
        KvLayout layout = LayoutDetector.detect(HybridTensors.tensors(1, DType.BFLOAT16, 8, 2, 16, 1, 32), HybridTensors.NHD, 64);
        KernelGroup recurrent = new KernelGroup(0, 0, new int[] {0}, layout, 16, 16, 0, true, 4, 1);
        assertEquals(0, SkipRule.keptTokensToSkip(recurrent, 63), "the chunk-end snapshot is not fully covered: written whole");
        assertEquals(16, SkipRule.keptTokensToSkip(recurrent, 64), "the whole chunk is skipped: so is its snapshot");
        KernelGroup attention = new KernelGroup(0, 0, new int[] {0}, layout, 16, EngineGroupInfo.FULL_ATTENTION, 0, false, 4, 4);
        assertEquals(20, SkipRule.keptTokensToSkip(attention, 20), "rows of a partly skipped block are left alone");
    }
}
