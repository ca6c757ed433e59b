package io.lmcache.server.agent;

/**
 * One background job, run by an {@link AgentRunner} (Agrona's Agent model): {@link #doWork()} does
 * a bounded slice of work and says how much it did, so the runner can idle when there is none.
 * Agents never sleep, block or loop forever inside {@code doWork}; time-driven agents check a
 * deadline ({@code deadlineNs - nowNs < 0}) and return 0 until it passes.
 */
public interface Agent {
    /** Does what is due now; returns a count of the work done (0 = nothing, the runner may idle). */
    int doWork() throws Exception;

    /** The agent's name, for logs, counters and the thread map. */
    String roleName();

    /** Called once on the agent's thread before the first {@link #doWork()}. */
    default void onStart() {
    }

    /** Called once on the agent's thread after the last {@link #doWork()} (or by the closer if the thread never started). */
    default void onClose() {
    }
}
