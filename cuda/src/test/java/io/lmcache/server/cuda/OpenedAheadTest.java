package io.lmcache.server.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.protocol.EventHandle;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** Worker events opened on the poller's thread ahead of their transfer, host-only: a stand-in driver counts opens and destroys. */
class OpenedAheadTest {
    /** Opens a fresh object per call (or throws when told to), and remembers what it opened and destroyed. */
    private static final class FakeDriver implements OpenedAhead.Driver<Object> {
        final List<Object> opened = Collections.synchronizedList(new ArrayList<>());
        final List<Object> destroyed = Collections.synchronizedList(new ArrayList<>());
        volatile boolean refuse;
        volatile CountDownLatch entered;
        volatile CountDownLatch release;

        @Override
        public Object open(byte[] handle) {
            if (entered != null) {
                entered.countDown();
                awaitQuietly(release);
            }
            if (refuse) {
                throw new CudaException("cuIpcOpenEventHandle: CUDA_ERROR_INVALID_VALUE");
            }
            Object event = new Object();
            opened.add(event);
            return event;
        }

        @Override
        public void destroy(Object event) {
            destroyed.add(event);
        }
    }

    private final FakeDriver driver = new FakeDriver();
    private final AtomicLong nowNs = new AtomicLong(1_000_000);
    private final OpenedAhead<Object> ahead = new OpenedAhead<>(driver, nowNs::get);

    private static byte[] handle(int seed) {
        byte[] handle = new byte[64];
        handle[0] = (byte) seed;
        handle[63] = 1;
        return handle;
    }

    @Test
    void aTransferTakesTheEventThePollerOpenedForItsHandle() {
        Runnable open = ahead.post(handle(1));
        assertNotNull(open);
        open.run();
        assertSame(driver.opened.getFirst(), ahead.take(handle(1)), "the event opened ahead, by the handle's bytes");
        assertEquals(0, ahead.waiting());
        assertNull(ahead.take(handle(1)), "taken once: a second transfer with the same handle opens its own");
        assertEquals(List.of(), driver.destroyed, "the transfer owns it now: nothing here destroys it");
    }

    @Test
    void aTransferThatStartsBeforeThePollerOpensItsOwnAndThePollerThenOpensNothing() {
        Runnable open = ahead.post(handle(2));
        assertNull(ahead.take(handle(2)));
        open.run();
        assertEquals(List.of(), driver.opened);
        assertEquals(0, ahead.waiting());
    }

    @Test
    void aTransferWaitsForAnOpenThePollerHasBegun() throws Exception {
        driver.entered = new CountDownLatch(1);
        driver.release = new CountDownLatch(1);
        Runnable open = ahead.post(handle(3));
        CompletableFuture<Void> poller = CompletableFuture.runAsync(open);
        driver.entered.await(10, TimeUnit.SECONDS);
        CompletableFuture<Object> taken = CompletableFuture.supplyAsync(() -> ahead.take(handle(3)));
        driver.release.countDown();
        poller.get(10, TimeUnit.SECONDS);
        assertSame(driver.opened.getFirst(), taken.get(10, TimeUnit.SECONDS));
    }

    @Test
    void anOpenTheDriverRefusesLeavesTheTransferToOpenItself() {
        driver.refuse = true;
        ahead.post(handle(4)).run();
        assertEquals(0, ahead.waiting(), "a failed open leaves nothing waiting");
        assertNull(ahead.take(handle(4)));
    }

    @Test
    void eventsNobodyTakesAreDestroyedOnceTheyWaitedTooLong() {
        ahead.post(handle(5)).run();
        Runnable neverRun = ahead.post(handle(6));
        nowNs.addAndGet(OpenedAhead.UNCLAIMED_NS);
        assertEquals(0, ahead.sweep(), "not older than the limit yet");
        nowNs.incrementAndGet();
        assertEquals(2, ahead.sweep());
        assertEquals(driver.opened, driver.destroyed, "the opened one destroyed; the queued one was never opened");
        neverRun.run();
        assertEquals(1, driver.opened.size(), "a swept open does not run late");
        assertNull(ahead.take(handle(5)));
    }

    @Test
    void thePollersNextOpenSweepsWhatWaitedTooLong() {
        ahead.post(handle(7)).run();
        nowNs.addAndGet(OpenedAhead.UNCLAIMED_NS + 1);
        ahead.post(handle(8)).run();
        assertEquals(List.of(driver.opened.getFirst()), driver.destroyed, "the old one went as the new one was opened");
        assertEquals(1, ahead.waiting());
        assertSame(driver.opened.get(1), ahead.take(handle(8)));
    }

    @Test
    void atMostMaxSlotsWaitOneHandleWaitsOnceAndAFullTableIsSwept() {
        assertNotNull(ahead.post(handle(9)));
        assertNull(ahead.post(handle(9)), "the same handle is already on its way");
        for (int i = 1; i < OpenedAhead.MAX_SLOTS; i++) {
            byte[] h = handle(9);
            h[1] = (byte) i;
            h[2] = (byte) (i >> 8);
            assertNotNull(ahead.post(h));
        }
        Runnable sweepOnly = ahead.post(handle(10));
        assertNotNull(sweepOnly, "past the bound: a sweep, not an open");
        assertNull(ahead.post(handle(11)), "one sweep at a time");
        sweepOnly.run();
        assertEquals(OpenedAhead.MAX_SLOTS, ahead.waiting(), "none was old enough to go");
        assertEquals(List.of(), driver.opened);
        nowNs.addAndGet(OpenedAhead.UNCLAIMED_NS + 1);
        ahead.post(handle(12)).run();
        assertEquals(0, ahead.waiting(), "a full table of events nobody took empties once they are old");
        assertNotNull(ahead.post(handle(13)), "and takes opens again");
    }

    @Test
    void closeDestroysEveryOpenedEventStillWaiting() {
        ahead.post(handle(11)).run();
        ahead.post(handle(12));
        ahead.close();
        assertEquals(driver.opened, driver.destroyed);
        assertEquals(0, ahead.waiting());
    }

    @Test
    void onlyLongTransfersWithACudaEventHaveItOpenedAhead() {
        assertTrue(OpenedAhead.applies(16, 16, handle(14)));
        assertTrue(OpenedAhead.applies(16, 64, handle(14)));
        assertFalse(OpenedAhead.applies(16, 15, handle(14)), "a short plan does not cover the open");
        assertFalse(OpenedAhead.applies(0, 64, handle(14)), "0 turns it off");
        assertFalse(OpenedAhead.applies(16, 64, new byte[64]), "a CPU stub's zeros: no event");
        assertFalse(OpenedAhead.applies(16, 64, new byte[EventHandle.TIMELINE_BYTES]), "an isolated-IPC payload is no CUDA event");
        assertFalse(OpenedAhead.applies(16, 64, new byte[0]), "the newest clients' no event");
    }

    @Test
    void theHandleIsCopiedWhenPosted() {
        byte[] handle = handle(13);
        ahead.post(handle).run();
        byte[] same = handle.clone();
        handle[5] = 42; // the request's array, reused by nobody but changed here: the slot keeps what was posted
        assertNotNull(ahead.take(same));
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
