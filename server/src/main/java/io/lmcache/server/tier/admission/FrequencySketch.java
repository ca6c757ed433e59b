package io.lmcache.server.tier.admission;

import java.util.Arrays;

/**
 * How often a 64-bit key was seen lately, approximately (TinyLFU: Einziger, Friedman, Manes, "TinyLFU: A Highly Efficient
 * Cache Admission Policy", 2017; the layout follows the idea of Caffeine's {@code FrequencySketch}, written here from the
 * paper's description, not copied). A count-min sketch of 4-bit counters (four per key, the estimate is their minimum) behind a
 * doorkeeper bit set: a key's first sighting only sets its doorkeeper bits, so the one-hit wonders that make up most of a KV
 * workload's chunks never reach the counters. After {@code sampleSize} sightings every counter is halved and the doorkeeper
 * cleared (aging), so a chunk popular last hour does not stay admitted forever. Fixed memory: {@code 8 x tableLongs} bytes of
 * counters and {@code tableLongs} bytes of doorkeeper. Not thread-safe (its one owner synchronizes).
 */
final class FrequencySketch {
    /** The largest estimate: a 4-bit counter, plus the doorkeeper's one. */
    static final int MAX_FREQUENCY = 16;
    private static final long[] SEEDS = {0xc3a5c85c97cb3127L, 0xb492b66fbe98f273L, 0x9ae16a3b2f90404fL, 0xcbf29ce484222325L};
    private static final long RESET_MASK = 0x7777_7777_7777_7777L;

    private final long[] table;
    private final long[] doorkeeper;
    private final int tableMask;
    private final int doorMask;
    private final long sampleSize;
    private long additions;
    private long resets;

    /** A sketch for about {@code expectedKeys} distinct keys in play (rounded up to a power of two, at least 1024). */
    FrequencySketch(int expectedKeys) {
        int size = Integer.highestOneBit(Math.max(1024, Math.min(1 << 24, expectedKeys) - 1) << 1);
        this.table = new long[size];               // 16 counters per long: 16 per expected key
        this.doorkeeper = new long[size / 8];     // 8 bits per expected key
        this.tableMask = size * 16 - 1;
        this.doorMask = size * 8 - 1;
        this.sampleSize = 10L * size;
    }

    /** The estimated sightings of {@code key} since the last aging, 0..{@link #MAX_FREQUENCY}. */
    int frequency(long key) {
        long h = spread(key);
        if (!doorkeeperHas(h)) {
            return 0;
        }
        int min = 15;
        for (int i = 0; i < 4; i++) {
            min = Math.min(min, counter(index(h, i)));
        }
        return min + 1;
    }

    /** Records one sighting of {@code key}: its doorkeeper bits the first time, its counters after. */
    void increment(long key) {
        long h = spread(key);
        if (doorkeeperAdd(h)) {
            for (int i = 0; i < 4; i++) {
                int at = index(h, i);
                if (counter(at) < 15) {
                    table[at >>> 4] += 1L << ((at & 15) << 2);
                }
            }
        }
        if (++additions >= sampleSize) {
            age();
        }
    }

    /** Times the sketch aged (halved its counters). */
    long resets() {
        return resets;
    }

    private void age() {
        for (int i = 0; i < table.length; i++) {
            table[i] = (table[i] >>> 1) & RESET_MASK;
        }
        Arrays.fill(doorkeeper, 0L);
        additions /= 2;
        resets++;
    }

    private int counter(int at) {
        return (int) ((table[at >>> 4] >>> ((at & 15) << 2)) & 0xfL);
    }

    private int index(long h, int i) {
        long x = (h + SEEDS[i]) * SEEDS[(i + 1) & 3];
        return (int) (x ^ (x >>> 32)) & tableMask;
    }

    /** Whether both of the key's doorkeeper bits are set. */
    private boolean doorkeeperHas(long h) {
        int a = (int) h & doorMask;
        int b = (int) (h >>> 32) & doorMask;
        return bit(a) && bit(b);
    }

    /** Sets the key's doorkeeper bits; true when they were both set already (a second sighting). */
    private boolean doorkeeperAdd(long h) {
        int a = (int) h & doorMask;
        int b = (int) (h >>> 32) & doorMask;
        boolean had = bit(a) && bit(b);
        doorkeeper[a >>> 6] |= 1L << a;
        doorkeeper[b >>> 6] |= 1L << b;
        return had;
    }

    private boolean bit(int at) {
        return (doorkeeper[at >>> 6] & (1L << at)) != 0;
    }

    /** A 64-bit finalizer (SplitMix64's), so keys that differ in a few bits spread over the table. */
    private static long spread(long key) {
        long z = key + 0x9e3779b97f4a7c15L;
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }
}
