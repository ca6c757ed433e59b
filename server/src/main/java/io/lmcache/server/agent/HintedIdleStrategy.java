package io.lmcache.server.agent;

import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;

/**
 * Spins a few turns, then parks for as long as the agent says nothing falls due ({@code parkNs}, read after each idle turn,
 * at most {@code maxParkNs}); work resets the spins. For an agent whose idle turns wait on a deadline it knows (the KV-event
 * streams' linger): a doubling backoff from 1 µs wakes its thread about ten times per millisecond of waiting, this once.
 * Whatever else brings work (an append, an ack, a new subscription) unparks the thread ({@link AgentRunner#wake()}).
 */
public final class HintedIdleStrategy implements IdleStrategy {
    private final int maxSpins;
    private final LongSupplier parkNs;
    private final long maxParkNs;
    private final Parker parker;
    private int spins;

    /** How the thread parks (tests count the parks instead). */
    @FunctionalInterface
    interface Parker {
        void parkNanos(long ns);
    }

    HintedIdleStrategy(int maxSpins, LongSupplier parkNs, long maxParkNs, Parker parker) {
        if (maxParkNs <= 0) {
            throw new IllegalArgumentException("need maxParkNs > 0, got " + maxParkNs);
        }
        this.maxSpins = maxSpins;
        this.parkNs = parkNs;
        this.maxParkNs = maxParkNs;
        this.parker = parker;
    }

    HintedIdleStrategy(int maxSpins, LongSupplier parkNs, long maxParkNs) {
        this(maxSpins, parkNs, maxParkNs, LockSupport::parkNanos);
    }

    @Override
    public void idle(int workCount) {
        if (workCount > 0) {
            spins = 0;
            return;
        }
        if (spins < maxSpins) {
            spins++;
            Thread.onSpinWait();
            return;
        }
        long ns = parkNs.getAsLong();
        if (ns <= 0) {
            Thread.onSpinWait(); // due already: the next turn does it
        } else {
            parker.parkNanos(Math.min(ns, maxParkNs));
        }
    }
}
