package io.lmcache.server.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Several agents on one thread: each gets every turn, and one's failure is its own. */
class CompositeAgentTest {
    private static Agent agent(String role, List<String> calls, int work, boolean throwing) {
        return new Agent() {
            @Override
            public int doWork() {
                calls.add(role);
                if (throwing) {
                    throw new IllegalStateException(role + " failed");
                }
                return work;
            }

            @Override
            public String roleName() {
                return role;
            }

            @Override
            public void onStart() {
                calls.add(role + ".start");
                if (throwing) {
                    throw new IllegalStateException(role + " cannot start");
                }
            }

            @Override
            public void onClose() {
                calls.add(role + ".close");
                if (throwing) {
                    throw new IllegalStateException(role + " cannot close");
                }
            }
        };
    }

    @Test
    void everyAgentRunsEveryTurnAndWorkIsSummed() {
        List<String> calls = new ArrayList<>();
        CompositeAgent composite = new CompositeAgent("all", new AgentErrors(), List.of(agent("a", calls, 1, false), agent("b", calls, 2, false)));
        assertEquals(3, composite.doWork());
        assertEquals(3, composite.doWork());
        assertEquals(List.of("a", "b", "a", "b"), calls);
    }

    @Test
    void aFailingAgentNeitherStarvesTheOthersNorCountsAgainstThem() {
        List<String> calls = new ArrayList<>();
        AgentErrors errors = new AgentErrors();
        CompositeAgent composite = new CompositeAgent("all", errors,
                List.of(agent("first", calls, 1, false), agent("broken", calls, 5, true), agent("last", calls, 1, false)));
        composite.onStart();
        assertEquals(2, composite.doWork(), "the failed agent's turn counts as no work");
        assertEquals(2, composite.doWork());
        composite.onClose();
        assertEquals(List.of("first.start", "broken.start", "last.start", "first", "broken", "last", "first", "broken", "last",
                "first.close", "broken.close", "last.close"), calls);
        assertEquals(4, errors.count("broken"), "two turns, the start and the close");
        assertEquals(0, errors.count("first") + errors.count("last") + errors.count("all"));
    }
}
