package io.lmcache.server.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class BatchSizesTest {
    private static final long MIB = 1L << 20;

    /** The batches of a transfer of {@code total} bytes, each taking exactly its budget (fine-grained pieces). */
    private static List<Long> batches(long total, long growth, boolean taper) {
        BatchSizes sizes = new BatchSizes(2 * MIB, 32 * MIB, growth, taper, total);
        List<Long> out = new ArrayList<>();
        for (long left = total; left > 0;) {
            long batch = Math.min(sizes.next(), left);
            sizes.staged(batch);
            out.add(batch);
            left -= batch;
        }
        return out;
    }

    @Test
    void withoutTaperBatchesGrowToAHalf() {
        assertEquals(List.of(2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB, 2 * MIB), batches(32 * MIB, 2, false));
        assertEquals(List.of(2 * MIB, 8 * MIB, 22 * MIB), batches(32 * MIB, 4, false));
        assertEquals(List.of(2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB, 32 * MIB, 32 * MIB, 2 * MIB), batches(96 * MIB, 2, false));
    }

    @Test
    void aTaperedTransferEndsOnASmallBatchAndNeverShrinksByMoreThanFiveTimes() {
        for (long total : new long[] {4 * MIB, 32 * MIB, 128 * MIB, 2048 * MIB}) {
            for (long growth : new long[] {2, 4}) {
                List<Long> sizes = batches(total, growth, true);
                assertEquals(total, sizes.stream().mapToLong(Long::longValue).sum());
                assertTrue(sizes.getLast() <= 4 * MIB, "the exposed last scatter is short: " + sizes);
                assertEquals(2 * MIB, (long) sizes.getFirst(), "the first batch stays small: " + sizes);
                for (int i = 1; i < sizes.size(); i++) {
                    assertTrue(sizes.get(i) * 5 >= sizes.get(i - 1), "each scatter fits under the next DMA: " + sizes);
                    assertTrue(sizes.get(i) <= 32 * MIB, sizes.toString());
                }
            }
        }
        assertEquals(5, batches(32 * MIB, 2, true).size(), "2, 4, 8, 14.4, 3.6 MiB: one launch more than without");
    }
}
