package io.lmcache.server.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** Spins first, then parks for the agent's hint (capped), never when the hint says it is due; work resets the spins. */
class HintedIdleStrategyTest {
    @Test
    void parksForTheAgentsHintCappedAndNotWhenDue() {
        AtomicLong hint = new AtomicLong(3_000_000);
        List<Long> parks = new ArrayList<>();
        HintedIdleStrategy idle = new HintedIdleStrategy(2, hint::get, 50_000_000, parks::add);
        idle.idle(0);
        idle.idle(0);
        assertEquals(List.of(), parks, "spins come before any park");
        idle.idle(0);
        assertEquals(List.of(3_000_000L), parks, "one park until the agent's deadline, not a backoff from 1 µs");
        hint.set(Long.MAX_VALUE);
        idle.idle(0);
        assertEquals(50_000_000L, parks.getLast(), "nothing due: the cap");
        hint.set(0);
        idle.idle(0);
        assertEquals(2, parks.size(), "due already: no park");
        idle.idle(1);
        hint.set(1_000);
        idle.idle(0);
        assertEquals(2, parks.size(), "work resets the spins");
    }
}
