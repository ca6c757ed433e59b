package io.lmcache.server.agent;

import java.util.List;

/**
 * Several agents on one thread (Agrona's CompositeAgent): every turn each gets its doWork, in list
 * order. A failing agent is counted under its own role and the others still run, that turn and
 * every turn after; onStart and onClose reach every agent the same way.
 */
public final class CompositeAgent implements Agent {
    private final String roleName;
    private final AgentErrors errors;
    private final Agent[] agents;

    public CompositeAgent(String roleName, AgentErrors errors, List<? extends Agent> agents) {
        this.roleName = roleName;
        this.errors = errors;
        this.agents = agents.toArray(new Agent[0]);
    }

    @Override
    public int doWork() {
        int work = 0;
        for (Agent agent : agents) {
            try {
                work += agent.doWork();
            } catch (Throwable t) {
                errors.record(agent.roleName(), t);
            }
        }
        return work;
    }

    @Override
    public void onStart() {
        for (Agent agent : agents) {
            try {
                agent.onStart();
            } catch (Throwable t) {
                errors.record(agent.roleName(), t);
            }
        }
    }

    @Override
    public void onClose() {
        for (Agent agent : agents) {
            try {
                agent.onClose();
            } catch (Throwable t) {
                errors.record(agent.roleName(), t);
            }
        }
    }

    @Override
    public String roleName() {
        return roleName;
    }
}
