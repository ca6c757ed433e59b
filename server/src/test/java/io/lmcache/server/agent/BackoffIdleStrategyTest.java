package io.lmcache.server.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** Spins, yields, then parks that double up to the cap; work resets it. */
class BackoffIdleStrategyTest {
    @Test
    void parksDoubleUpToTheCapAndWorkResetsThem() {
        BackoffIdleStrategy idle = new BackoffIdleStrategy(2, 1, 1_000, 4_000);
        idle.idle(0);
        idle.idle(0);
        idle.idle(0);
        assertEquals(1_000, idle.nextParkNs(), "spins and a yield come before any park");
        idle.idle(0);
        assertEquals(2_000, idle.nextParkNs());
        idle.idle(0);
        idle.idle(0);
        assertEquals(4_000, idle.nextParkNs(), "never past the cap");
        idle.idle(1);
        assertEquals(1_000, idle.nextParkNs());
    }

    @Test
    void rejectsAnInvertedRange() {
        assertThrows(IllegalArgumentException.class, () -> new BackoffIdleStrategy(1, 1, 2_000, 1_000));
    }
}
