package io.lmcache.server.metrics;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.lmcache.server.loop.RequestPhase;
import java.util.Map;
import java.util.stream.LongStream;
import org.junit.jupiter.api.Test;

/** The ring of recent request times: the last {@link PhaseTimes#RECENT} per op, oldest first, each op its own. */
class PhaseTimesTest {
    @SuppressWarnings("unchecked")
    private static long[] recent(PhaseTimes<RequestPhase> times, String op) {
        return (long[]) ((Map<String, Object>) times.status().get(op)).get("recent_us");
    }

    @Test
    void keepsTheLastRequestsOldestFirst() {
        PhaseTimes<RequestPhase> times = new PhaseTimes<>(RequestPhase.class);
        assertFalse(((Map<?, ?>) times.status().get("store")).containsKey("recent_us"));
        for (long us = 1; us <= 3; us++) {
            times.recent(true, us * 1000);
        }
        assertArrayEquals(new long[] {1, 2, 3}, recent(times, "store"));
        for (long us = 4; us <= PhaseTimes.RECENT + 10; us++) {
            times.recent(true, us * 1000);
        }
        times.recent(false, 7_500);
        assertArrayEquals(LongStream.rangeClosed(11, PhaseTimes.RECENT + 10).toArray(), recent(times, "store"));
        assertArrayEquals(new long[] {7}, recent(times, "retrieve"));
    }

    @Test
    @SuppressWarnings("unchecked")
    void keepsTheLastTimelinesOldestFirstPerOp() {
        PhaseTimes<RequestPhase> times = new PhaseTimes<>(RequestPhase.class);
        assertFalse(((Map<?, ?>) times.status().get("store")).containsKey("recent_timeline_ns"));
        for (long i = 1; i <= PhaseTimes.RECENT + 5; i++) {
            times.sent(true, 10 * i, 10 * i + 1, 10 * i + 2);
        }
        times.sent(false, 7, 8, 9);
        long[][] store = (long[][]) ((Map<String, Object>) times.status().get("store")).get("recent_timeline_ns");
        assertEquals(PhaseTimes.RECENT - 1, store.length, "all but the slot the writer may be overwriting");
        assertArrayEquals(new long[] {70, 71, 72}, store[0]);
        assertArrayEquals(new long[] {10L * (PhaseTimes.RECENT + 5), 10L * (PhaseTimes.RECENT + 5) + 1, 10L * (PhaseTimes.RECENT + 5) + 2},
                store[store.length - 1]);
        long[][] retrieve = (long[][]) ((Map<String, Object>) times.status().get("retrieve")).get("recent_timeline_ns");
        assertArrayEquals(new long[][] {{7, 8, 9}}, retrieve);
    }
}
