package io.lmcache.server.l2;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * fault_inject's drop rules against values computed independently with Python 3's
 * {@code hashlib.blake2b(digest_size=8)} and {@code int(round(...))} (the vectors below were printed by
 * that code, not by this implementation).
 */
class FaultRulesTest {
    private static final long HI = 0x0123456789abcdefL;
    private static final long LO = 0xfedcba9876543210L;
    private static final long W2 = 0x0011223344556677L;
    private static final long W3 = 0x8899aabbccddeeffL;
    /** {@code chunk_hash.hex()} of the 32-byte hash HI LO W2 W3, as the Python vectors below were computed over. */
    private static final String HASH_HEX = "0123456789abcdeffedcba987654321000112233445566778899aabbccddeeff";

    private static String hex(byte[] bytes) {
        return HexFormat.of().formatHex(bytes);
    }

    @Test
    void blake2bMatchesPython() {
        assertEquals("e4a6a0577479b2b4", hex(Blake2b.hash(new byte[0], 8)));
        assertEquals("d8bb14d833d59559", hex(Blake2b.hash("abc".getBytes(StandardCharsets.US_ASCII), 8)));
        // the RFC 7693 appendix A vector, full 64 bytes
        assertEquals("ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d17d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923",
                hex(Blake2b.hash("abc".getBytes(StandardCharsets.US_ASCII), 64)));
        // block boundaries: exactly one block, one byte more, four blocks
        assertEquals("c2d13df1b6617e82", hex(Blake2b.hash(counting(128), 8)));
        assertEquals("f667e47a6d5350a6", hex(Blake2b.hash(counting(129), 8)));
        byte[] twice = new byte[512];
        for (int i = 0; i < 512; i++) {
            twice[i] = (byte) i;
        }
        assertEquals("e4ac345f5aeb2a0e", hex(Blake2b.hash(twice, 8)));
    }

    private static byte[] counting(int n) {
        byte[] out = new byte[n];
        for (int i = 0; i < n; i++) {
            out[i] = (byte) i;
        }
        return out;
    }

    @Test
    void identAndBucketMatchPython() {
        L2Hash hash = new L2Hash(HI, LO, W2, W3);
        L2Key qwen = L2Key.of("Qwen/Qwen3-8B", 0, 0, hash, "");
        assertEquals("0:" + HASH_HEX + ":Qwen/Qwen3-8B:0:0:", FaultRules.ident(0, qwen));
        assertEquals(0x47557a72a1986e72L, Blake2b.hash64BigEndian(FaultRules.ident(0, qwen).getBytes(StandardCharsets.UTF_8)));
        assertEquals(271154, FaultRules.bucket(0, qwen));
        L2Key salted = L2Key.of("m", 1, 2, hash, "tenant-a");
        assertEquals("42:" + HASH_HEX + ":m:1:2:tenant-a", FaultRules.ident(42, salted));
        assertEquals(850985, FaultRules.bucket(42, salted));
        assertEquals(786606, FaultRules.bucket(7, L2Key.of("fault/model", 0, 0, hash, "")),
                "the digest de7d53f9384427ae has its top bit set: read unsigned");
    }

    @Test
    void rateDropsExactlyTheKeysBelowTheTruncatedThreshold() {
        L2Key key = L2Key.of("Qwen/Qwen3-8B", 0, 0, new L2Hash(HI, LO, W2, W3), ""); // bucket 271154
        assertFalse(rules(0.0).dropByRate(key), "rate 0 never drops");
        assertFalse(rules(0.271154).dropByRate(key), "int(0.271154e6) = 271154 is not above the bucket");
        assertTrue(rules(0.271155).dropByRate(key));
        assertTrue(rules(1.0).dropByRate(key), "rate 1 drops every key");
    }

    @Test
    void tailRatiosRoundHalfToEvenAsPython() {
        // int(round((1 - r) * (n - 1))) printed by Python: the .5 cases go to the even neighbour
        assertEquals(2, FaultRules.tailPosition(0.5, 4)); // 1.5 -> 2
        assertEquals(0, FaultRules.tailPosition(0.5, 2)); // 0.5 -> 0, not 1 as Math.round gives
        assertEquals(2, FaultRules.tailPosition(0.5, 6)); // 2.5 -> 2
        assertEquals(0, FaultRules.tailPosition(0.75, 3)); // 0.5 -> 0
        assertEquals(2, FaultRules.tailPosition(0.25, 3)); // 1.5 -> 2
        assertEquals(3, FaultRules.tailPosition(0.0, 4)); // the last key
        assertEquals(0, FaultRules.tailPosition(1.0, 4)); // the first key
        assertEquals(0, FaultRules.tailPosition(0.5, 1));
        assertEquals(4, FaultRules.tailPosition(0.5, 8)); // 3.5 -> 4
    }

    @Test
    void aPositionIsDroppedWhenAnyRuleMatches() {
        List<L2Key> keys = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            keys.add(L2Key.of("m", 0, 0, new L2Hash(HI, i, 0, 0), ""));
        }
        assertArrayEquals(new int[] {2}, new FaultRules(0, 0, Set.of(), List.of(0.5)).dropPositions(keys));
        assertArrayEquals(new int[] {0, 2, 5}, new FaultRules(0, 0, new TreeSet<>(Set.of(0, 9)), List.of(0.5, 0.0)).dropPositions(keys),
                "gap index 9 is past the task's keys: nothing");
        assertArrayEquals(new int[] {0, 1, 2, 3, 4, 5}, rules(1.0).dropPositions(keys));
        assertArrayEquals(new int[0], rules(0.0).dropPositions(keys));
        assertArrayEquals(new int[0], new FaultRules(0, 0, Set.of(), List.of(0.5)).dropPositions(List.of()));
    }

    private static FaultRules rules(double rate) {
        return new FaultRules(rate, 0, Set.of(), List.of());
    }
}
