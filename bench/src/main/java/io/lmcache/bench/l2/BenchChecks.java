package io.lmcache.bench.l2;

import java.util.Locale;

/** What the two L2 benchmarks (fs_native, Redis) share: a check that stops a run whose figures would be wrong, and the GB/s format. */
final class BenchChecks {
    private BenchChecks() {}

    static void check(boolean condition, String what) {
        if (!condition) {
            throw new IllegalStateException("benchmark check failed: " + what);
        }
    }

    static String gbs(long bytes, double seconds) {
        return String.format(Locale.ROOT, "%.2f", bytes / seconds / 1e9);
    }
}
