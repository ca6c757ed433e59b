package io.lmcache.server.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Random;
import org.junit.jupiter.api.Test;

/** The hash of chunk i names the whole prefix [0, (i+1)*C): equal prefixes agree, any earlier change propagates. */
class ChunkHasherTest {
    private static final int C = 256;

    @Test
    void samePrefixSameHashes() {
        int[] a = tokens(4 * C, 1);
        int[] b = a.clone();
        b[3 * C + 5] ^= 1; // differs only in the last chunk
        long[] ha = hashes(a, 4);
        long[] hb = hashes(b, 4);
        for (int i = 0; i < 6; i++) {
            assertEquals(ha[i], hb[i], "chunks 0..2 agree");
        }
        assertNotEquals(ha[6], hb[6]);
    }

    @Test
    void anEarlierChangeChangesEveryLaterChunk() {
        int[] a = tokens(4 * C, 2);
        int[] b = a.clone();
        b[10] += 1;
        long[] ha = hashes(a, 4);
        long[] hb = hashes(b, 4);
        for (int chunk = 0; chunk < 4; chunk++) {
            assertNotEquals(ha[2 * chunk], hb[2 * chunk], "chunk " + chunk);
        }
    }

    @Test
    void identicalChunksAtDifferentPositionsHashDifferently() {
        int[] repeated = new int[2 * C];
        long[] h = hashes(repeated, 2);
        assertNotEquals(h[0], h[2]);
    }

    @Test
    void deterministicAcrossInstances() {
        int[] a = tokens(2 * C, 3);
        long[] h1 = hashes(a, 2);
        long[] h2 = new long[4];
        new ChunkHasher().hashChunks(a, C, 2, h2);
        assertEquals(h1[0], h2[0]);
        assertEquals(h1[3], h2[3]);
    }

    @Test
    void hashingInPiecesContinuesTheChainExactly() {
        int[] a = tokens(7 * C, 11);
        long[] whole = hashes(a, 7);
        long[] pieces = new long[14];
        ChunkHasher hasher = new ChunkHasher();
        hasher.hashChunks(a, C, 0, 1, pieces);
        hasher.hashChunks(a, C, 1, 3, pieces);
        hasher.hashChunks(a, C, 3, 3, pieces); // an empty piece changes nothing
        hasher.hashChunks(a, C, 3, 7, pieces);
        assertArrayEquals(whole, pieces);
        assertThrows(IllegalArgumentException.class, () -> hasher.hashChunks(a, C, 4, 3, pieces));
        assertThrows(IllegalArgumentException.class, () -> hasher.hashChunks(a, C, 6, 8, new long[16]));
    }

    @Test
    void refusesMoreChunksThanTokens() {
        assertThrows(IllegalArgumentException.class, () -> new ChunkHasher().hashChunks(new int[C], C, 2, new long[4]));
    }

    private static long[] hashes(int[] tokens, int chunks) {
        long[] out = new long[2 * chunks];
        new ChunkHasher().hashChunks(tokens, C, chunks, out);
        return out;
    }

    private static int[] tokens(int n, long seed) {
        Random random = new Random(seed);
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = random.nextInt(150_000);
        }
        return t;
    }
}
