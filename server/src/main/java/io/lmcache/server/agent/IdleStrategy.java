package io.lmcache.server.agent;

import java.util.function.LongSupplier;

/**
 * What an {@link AgentRunner}'s thread does after a turn (Agrona's IdleStrategy): nothing when the
 * turn did work, otherwise spin, yield or park. Called only on the runner's thread; a park ends
 * early on {@link AgentRunner#wake()} or close.
 */
@FunctionalInterface
public interface IdleStrategy {
    void idle(int workCount);

    /** A few spins, a few yields, then parks that double from 1 µs up to {@code maxParkNs}. */
    static IdleStrategy backoff(long maxParkNs) {
        return new BackoffIdleStrategy(10, 5, 1_000, maxParkNs);
    }

    /**
     * A few spins, no yields (each is a system call), then parks as long as the agent's {@code parkNs} says (its next
     * deadline), at most {@code maxParkNs}: for an agent that idles after most of its turns, waiting on a deadline it knows.
     */
    static IdleStrategy spinThenParkFor(LongSupplier parkNs, long maxParkNs) {
        return new HintedIdleStrategy(10, parkNs, maxParkNs);
    }
}
