package io.lmcache.server.l2;

import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.SortedSet;
import java.util.TreeSet;
import java.util.stream.IntStream;

/**
 * Which keys of one load task fault_inject drops (hybrid-and-l2.md §B.7): a position is dropped
 * when any rule matches. {@code gapTailRatios}: position {@code round_half_even((1 - r)(n - 1))};
 * {@code gapIndices}: exact positions from the head; {@code rate}: a key whose
 * {@code blake2b-8("{seed}:{hash}:{model}:{rank}:{og}:{salt}")} (big-endian) mod 10^6 is below
 * {@code int(rate * 10^6)}. Deterministic per seed and key.
 */
public record FaultRules(double rate, long seed, Set<Integer> gapIndices, List<Double> gapTailRatios) {
    private static final long DENOMINATOR = 1_000_000;

    public FaultRules {
        gapIndices = Collections.unmodifiableSortedSet(new TreeSet<>(gapIndices)); // iterates sorted, as the banner and status print it
        gapTailRatios = List.copyOf(gapTailRatios);
    }

    /** The dropped positions of a load task's key list, ascending. */
    public int[] dropPositions(List<L2Key> keys) {
        int n = keys.size();
        SortedSet<Integer> tail = new TreeSet<>();
        for (double ratio : gapTailRatios) {
            if (n > 0) {
                tail.add(tailPosition(ratio, n));
            }
        }
        return IntStream.range(0, n)
                .filter(i -> tail.contains(i) || gapIndices.contains(i) || dropByRate(keys.get(i))).toArray();
    }

    /** Python's {@code int(round((1.0 - ratio) * (n - 1)))}: Math.rint rounds a half to the even neighbour, as Python's round does. */
    public static int tailPosition(double ratio, int n) {
        return (int) Math.rint((1.0 - ratio) * (n - 1));
    }

    public boolean dropByRate(L2Key key) {
        return rate > 0 && bucket(seed, key) < (long) (rate * DENOMINATOR);
    }

    /** The key's rate bucket in 0..999999. */
    public static long bucket(long seed, L2Key key) {
        return Long.remainderUnsigned(Blake2b.hash64BigEndian(ident(seed, key).getBytes(StandardCharsets.UTF_8)), DENOMINATOR);
    }

    /** {@code "{seed}:{chunk_hash.hex()}:{model}:{kv_rank}:{object_group}:{cache_salt}"}, numbers in decimal. */
    public static String ident(long seed, L2Key key) {
        return seed + ":" + key.hashHex() + ":" + key.model() + ":" + key.kvRank() + ":" + key.objectGroup() + ":" + key.salt();
    }
}
