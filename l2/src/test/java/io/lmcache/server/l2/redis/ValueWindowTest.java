package io.lmcache.server.l2.redis;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The window's counts: at most its limit in flight, the rest waiting in order, and nothing left counted once every send ended. */
class ValueWindowTest {
    @Test
    void waitingSendsStartInOrderAsPlacesFree() {
        List<Runnable> later = new ArrayList<>();
        ValueWindow window = new ValueWindow(2, later::add);
        List<Integer> started = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            int send = i;
            window.submit(() -> started.add(send));
        }
        assertEquals(List.of(0, 1), started);
        assertEquals(2, window.inFlight());
        assertEquals(2, window.waiting());
        window.release();
        later.removeFirst().run();
        assertEquals(List.of(0, 1, 2), started);
        assertEquals(2, window.inFlight());
        assertEquals(1, window.waiting());
    }

    /** A send after close (it fails at once on the closed link and releases its place) leaves no place counted. */
    @Test
    void sendsAfterCloseLeaveNothingInFlight() {
        ValueWindow window = new ValueWindow(1, Runnable::run);
        window.submit(window::release);
        List<Runnable> never = window.close();
        assertEquals(0, never.size());
        window.submit(window::release);
        window.submit(window::release);
        assertEquals(0, window.inFlight());
        assertEquals(0, window.waiting());
    }

    /** The sends that never started come back from close, counted in flight until each of them ends. */
    @Test
    void closeReturnsTheWaitingSends() {
        ValueWindow window = new ValueWindow(1, Runnable::run);
        window.submit(() -> {});
        window.submit(window::release);
        List<Runnable> never = window.close();
        assertEquals(1, never.size());
        assertEquals(2, window.inFlight());
        never.forEach(Runnable::run);
        window.release();
        assertEquals(0, window.inFlight());
    }
}
