package io.lmcache.server.agent;

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

    /** The same without the yields: for an agent that idles after most of its turns, where each yield is a system call. */
    static IdleStrategy spinThenPark(long maxParkNs) {
        return new BackoffIdleStrategy(10, 0, 1_000, maxParkNs);
    }
}
