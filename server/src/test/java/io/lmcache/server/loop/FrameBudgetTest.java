package io.lmcache.server.loop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.metrics.ZeromqCatalogue;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import zmq.Msg;

class FrameBudgetTest {
    private static final int MIB = 1 << 20;

    @Test
    void longFramesCannotTakeTheReservesThatShorterFramesOfRealRequestsNeed() {
        FrameBudget budget = new FrameBudget(64L * MIB, 16 * MIB, new ServerMetrics(), metadata -> { });
        assertEquals(16L * MIB, FrameBudget.reserveBytes(64L * MIB));
        assertEquals(8L * MIB, FrameBudget.shareReserveBytes(64L * MIB));
        List<Msg> stalled = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            stalled.add(budget.allocate(16 * MIB));
        }
        assertEquals(2, stalled.stream().filter(frame -> !FrameBudget.isOverBudget(frame)).count(), "40 of the 64 MiB for long frames");
        assertEquals(32L * MIB, budget.heldBytes());
        // frames up to 1 MiB (a long prompt's key) still fit, up to all but the short frames' reserve
        List<Msg> medium = new ArrayList<>();
        for (int i = 0; i < 24; i++) {
            Msg frame = budget.allocate(MIB);
            assertFalse(FrameBudget.isOverBudget(frame), "medium frame " + i);
            medium.add(frame);
        }
        assertTrue(FrameBudget.isOverBudget(budget.allocate(MIB)), "the medium frames' share is held");
        assertTrue(budget.exhausted() != null, "the health check hears of it");
        // the short frames of real requests (a REGISTER of 32 layers, a key of some 10 000 tokens) still fit
        for (int i = 0; i < 8 * 16; i++) {
            assertFalse(FrameBudget.isOverBudget(budget.allocate(64 << 10)), "short frame " + i);
        }
        assertTrue(FrameBudget.isOverBudget(budget.allocate(64 << 10)), "the whole budget is held");
        medium.forEach(FrameBudget::release);
        assertTrue(FrameBudget.isOverBudget(budget.allocate(MIB + 1)), "one byte longer is a long frame: no room left for those");
        assertFalse(FrameBudget.isOverBudget(budget.allocate(MIB)));
    }

    /** Issue 45, N4 scaled down: connections that declared 1 MiB frames and stalled hold no room short frames need. */
    @Test
    void stalledMediumFramesLeaveShortRequestsTheirRoom() {
        FrameBudget budget = new FrameBudget(64L * MIB, 16 * MIB, new ServerMetrics(), metadata -> { });
        List<Msg> attack = new ArrayList<>();
        for (int i = 0; i < 80; i++) {
            attack.add(budget.allocate(MIB));
        }
        assertEquals(56, attack.stream().filter(frame -> !FrameBudget.isOverBudget(frame)).count());
        assertFalse(FrameBudget.isOverBudget(budget.allocate(32 * 420)), "a 32-layer REGISTER's frame");
        assertFalse(FrameBudget.isOverBudget(budget.allocate(8 << 10)), "a request over 4 KiB");
    }

    @Test
    void aFrameWhoseBytesStopComingIsStalledAndOneThatArrivesIsNot() {
        FrameBudget budget = new FrameBudget(64L * MIB, 16 * MIB, new ServerMetrics(), metadata -> { });
        Msg moving = budget.allocate(MIB);
        Msg stuck = budget.allocate(MIB);
        ByteBuffer movingView = moving.buf(); // what the decoder reads into
        stuck.buf().position(1024); // a 1 MiB header and 1 KiB, then nothing
        long t0 = 1_000_000_000L;
        assertEquals(0, budget.stalledFrames(t0));
        movingView.position(4096);
        assertEquals(0, budget.stalledFrames(t0 + FrameBudget.MID_FRAME_STALL_NS / 2));
        movingView.position(8192);
        assertEquals(1, budget.stalledFrames(t0 + FrameBudget.MID_FRAME_STALL_NS + 1), "only the frame whose bytes stopped");
        FrameBudget.release(stuck);
        movingView.position(MIB);
        assertEquals(0, budget.stalledFrames(t0 + 3 * FrameBudget.MID_FRAME_STALL_NS));
    }

    @Test
    void theCutMessagesHelpSaysTheLimitTheLoopApplies() {
        // the catalogue writes the number (metrics/ names no server package): held equal to the loop's limit here
        assertTrue(ZeromqCatalogue.MESSAGES_CUT.spec().help().contains(" " + PartLimit.MAX_PARTS + " frames"),
                ZeromqCatalogue.MESSAGES_CUT.spec().help());
    }
}
