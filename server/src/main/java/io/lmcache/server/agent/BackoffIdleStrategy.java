package io.lmcache.server.agent;

import java.util.concurrent.locks.LockSupport;

/**
 * Spin, then yield, then park with a period that doubles up to {@code maxParkNs}; any work resets
 * it. The cap bounds how late a time-driven agent sees its deadline. One instance per thread.
 */
public final class BackoffIdleStrategy implements IdleStrategy {
    private final int maxSpins;
    private final int maxYields;
    private final long minParkNs;
    private final long maxParkNs;
    private int spins;
    private int yields;
    private long parkNs;

    public BackoffIdleStrategy(int maxSpins, int maxYields, long minParkNs, long maxParkNs) {
        if (minParkNs <= 0 || maxParkNs < minParkNs) {
            throw new IllegalArgumentException("need 0 < minParkNs <= maxParkNs, got " + minParkNs + ", " + maxParkNs);
        }
        this.maxSpins = maxSpins;
        this.maxYields = maxYields;
        this.minParkNs = minParkNs;
        this.maxParkNs = maxParkNs;
        this.parkNs = minParkNs;
    }

    @Override
    public void idle(int workCount) {
        if (workCount > 0) {
            spins = 0;
            yields = 0;
            parkNs = minParkNs;
        } else if (spins < maxSpins) {
            spins++;
            Thread.onSpinWait();
        } else if (yields < maxYields) {
            yields++;
            Thread.yield();
        } else {
            LockSupport.parkNanos(parkNs);
            parkNs = Math.min(parkNs << 1, maxParkNs);
        }
    }

    /** The park the next idle turn would take (tests). */
    long nextParkNs() {
        return parkNs;
    }
}
