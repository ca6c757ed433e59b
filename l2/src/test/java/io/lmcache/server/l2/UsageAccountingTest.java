package io.lmcache.server.l2;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.junit.jupiter.api.Test;

class UsageAccountingTest {
    private static L2Key key(int i) {
        return L2Key.of("org/model", L2Key.packKvRank(1, 0), 0, new L2Hash(0x1111L * i, 0x2222L + i, 0, 0), "");
    }

    @Test
    void aFileThisProcessWroteWhileTheScanRanIsNoEarlierRunsFile() {
        UsageAccounting accounting = new UsageAccounting(1 << 30);
        accounting.stored(List.of(key(4)), new long[] {400});
        // the scan lists key 4 too: it was written between the scan's start and its end
        AdapterLedger.Found found = accounting.found(List.of(key(1), key(4), key(1)), new long[] {100, 400, 100});
        assertEquals(new AdapterLedger.Found(1, 100), found, "only key 1 is an earlier run's, once");
        assertEquals(500, accounting.usage().totalBytesUsed());
        assertEquals(List.of(key(4)), accounting.knownKeys(), "key 4 stays this process's own, not a found one");
    }
}
