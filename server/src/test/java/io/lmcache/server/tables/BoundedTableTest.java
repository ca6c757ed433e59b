package io.lmcache.server.tables;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class BoundedTableTest {
    private static String longId(char fill, int chars) {
        return String.valueOf(fill).repeat(chars);
    }

    @Test
    void aMegabyteKeyIsKeptAsItsDigestAndStillFindsItsEntry() {
        BoundedTable<Integer> table = new BoundedTable<>("t", 1000, 1L << 30);
        for (int i = 0; i < 100; i++) {
            table.put(longId((char) ('a' + i % 26), 1 << 20) + i, i, 8, null);
        }
        assertEquals(100, table.size());
        assertTrue(table.bytes() < 100 * 1024, "100 one-megabyte ids hold " + table.bytes() + " bytes");
        assertEquals(7, table.get(longId((char) ('a' + 7), 1 << 20) + 7));
        assertNull(table.get(longId((char) ('a' + 7), 1 << 20) + 8));
        assertEquals(7, table.remove(longId((char) ('a' + 7), 1 << 20) + 7));
        assertEquals(99, table.size());
    }

    @Test
    void shortKeysAreThemselvesAndLongOnesNeverEqualAShortOne() {
        assertEquals("cmpl-123", WireKey.of("cmpl-123"));
        String longOne = longId('x', WireKey.MAX_CHARS + 1);
        assertNotEquals(longOne, WireKey.of(longOne));
        assertEquals(WireKey.of(longOne), WireKey.of(new String(longOne.toCharArray())));
        assertNotEquals(WireKey.of(longOne), WireKey.of(longOne + "y"));
        assertEquals('\u0000', WireKey.of(longOne).charAt(0));
        assertTrue(WireKey.of(longOne).length() < 64);
    }

    @Test
    void pastTheByteCapTheOldestGoFirstAndAreCountedAndHandedBack() {
        BoundedTable<Integer> table = new BoundedTable<>("t", 1000, 10_000);
        List<Integer> evicted = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            table.put("id-" + i, i, 100, evicted);
        }
        assertTrue(table.bytes() <= 10_000, "bytes " + table.bytes());
        assertEquals(100 - table.size(), evicted.size());
        assertEquals(evicted.size(), table.evictions());
        assertEquals(0, evicted.getFirst(), "oldest first");
        assertEquals(99, table.get("id-99"));
        assertNull(table.get("id-0"));
    }

    @Test
    void pastTheEntryCapTheOldestGoAndAPutMovesAnEntryToTheYoungEnd() {
        BoundedTable<Integer> table = new BoundedTable<>("t", 3, 1L << 30);
        table.put("a", 1, 0, null);
        table.put("b", 2, 0, null);
        table.put("c", 3, 0, null);
        table.put("a", 4, 0, null);
        List<Integer> evicted = new ArrayList<>();
        table.put("d", 5, 0, evicted);
        assertEquals(List.of(2), evicted, "b was the oldest once a was put again");
        assertEquals(List.of(3, 4, 5), table.values());
        assertEquals(1, table.evictions());
        List<Integer> expired = new ArrayList<>();
        assertEquals(2, table.removeOldestWhile(v -> v < 5, expired));
        assertEquals(List.of(3, 4), expired);
        assertEquals(1, table.size());
    }

    @Test
    void oneEntryLargerThanTheCapIsKeptAloneRatherThanLost() {
        BoundedTable<Integer> table = new BoundedTable<>("t", 10, 1000);
        table.put("small", 1, 10, null);
        table.put("huge", 2, 5000, null);
        assertEquals(List.of(2), table.values());
    }
}
