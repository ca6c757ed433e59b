package io.lmcache.server.loop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.metrics.ZeromqCatalogue;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import zmq.Msg;

class FrameBudgetTest {
    private static final int MIB = 1 << 20;

    @Test
    void longFramesCannotTakeTheReserveThatShortFramesOfRealRequestsNeed() {
        FrameBudget budget = new FrameBudget(64L * MIB, 16 * MIB, new ServerMetrics(), metadata -> { });
        assertEquals(16L * MIB, FrameBudget.reserveBytes(64L * MIB));
        List<Msg> stalled = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            stalled.add(budget.allocate(16 * MIB));
        }
        assertEquals(3, stalled.stream().filter(frame -> !FrameBudget.isOverBudget(frame)).count(), "48 of the 64 MiB for long frames");
        assertEquals(48L * MIB, budget.heldBytes());
        // frames up to 1 MiB (a REGISTER, a long prompt's key) still fit, up to the whole budget
        List<Msg> medium = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            Msg frame = budget.allocate(MIB);
            assertFalse(FrameBudget.isOverBudget(frame), "medium frame " + i);
            medium.add(frame);
        }
        assertTrue(FrameBudget.isOverBudget(budget.allocate(MIB)), "the whole budget is held");
        medium.forEach(FrameBudget::release);
        assertTrue(FrameBudget.isOverBudget(budget.allocate(MIB + 1)), "one byte longer is a long frame: no room left for those");
        assertFalse(FrameBudget.isOverBudget(budget.allocate(MIB)));
    }

    @Test
    void theCutMessagesHelpSaysTheLimitTheLoopApplies() {
        // the catalogue writes the number (metrics/ names no server package): held equal to the loop's limit here
        assertTrue(ZeromqCatalogue.MESSAGES_CUT.spec().help().contains(" " + PartLimit.MAX_PARTS + " frames"),
                ZeromqCatalogue.MESSAGES_CUT.spec().help());
    }
}
