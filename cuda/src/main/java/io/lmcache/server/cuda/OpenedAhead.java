package io.lmcache.server.cuda;

import io.lmcache.server.protocol.EventHandle;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongSupplier;

/**
 * Worker events opened before their transfer needs them (issue 52). A transfer's first copy waits for the worker's event,
 * which the lane thread used to open itself ({@code cuIpcOpenEventHandle}: a RETRIEVE's open phase of 25–41 µs at 64
 * Qwen-like chunks on an H100 host, 7–20 with this class, bench/RESULTS.md#gpu-hybrid-models) between the handler's
 * planning and that copy, in series with a request alone in flight. Now a handler that starts a transfer on an idle lane
 * {@linkplain #post posts} the open to the event poller's thread, so it runs while the handler plans; the transfer
 * {@linkplain #take takes} the opened event, waits for an open under way, or opens the event itself when the poller has
 * not begun it (or could not open it).
 *
 * <p>An event that no transfer takes (its request was refused after it started, or a STORE had nothing to copy) is
 * destroyed by the poller's next open after {@link #UNCLAIMED_NS}, or when the engine closes. At most {@link #MAX_SLOTS}
 * handles wait at a time; past that a transfer opens its own. Opens and sweeps run on the poller's thread only, so a sweep
 * never meets an open under way.
 *
 * @param <E> the opened event ({@code CUevent}; tests use their own)
 */
final class OpenedAhead<E> {
    static final int MAX_SLOTS = 64;
    static final long UNCLAIMED_NS = TimeUnit.SECONDS.toNanos(2);

    /** Opens and destroys events: the CUDA driver, or a test's stand-in. */
    interface Driver<E> {
        /** Opens the event a 64-byte handle names; throws when the driver refuses. */
        E open(byte[] handle);

        void destroy(E event);
    }

    private static final int QUEUED = 0;
    private static final int OPENING = 1;
    private static final int OPEN = 2;
    private static final int FAILED = 3;
    /** Taken before the poller began (the transfer opens its own), or swept: the poller's task does nothing. */
    private static final int GONE = 4;

    private static final class Slot<E> {
        /** The handle's bytes as a map key: one char per byte. */
        final String key;
        final byte[] handle;
        final long postedNs;
        final AtomicInteger state = new AtomicInteger(QUEUED);
        volatile E event;

        Slot(byte[] handle, long postedNs) {
            this.key = key(handle);
            this.handle = handle;
            this.postedNs = postedNs;
        }
    }

    private final Driver<E> driver;
    private final LongSupplier clockNs;
    private final Map<String, Slot<E>> slots = new ConcurrentHashMap<>();
    private final AtomicBoolean sweepPosted = new AtomicBoolean();

    /** {@code clockNs}: {@link System#nanoTime} (tests pass their own). */
    OpenedAhead(Driver<E> driver, LongSupplier clockNs) {
        this.driver = driver;
        this.clockNs = clockNs;
    }

    /**
     * Whether a transfer of {@code chunks} chunks has its event opened ahead under a bound of {@code minChunks} (0: never):
     * only a CUDA event's 64 non-zero bytes, as an isolated-IPC request's semaphore payload and a CPU stub's zeros open nothing.
     */
    static boolean applies(int minChunks, int chunks, byte[] clientEvent) {
        return minChunks > 0 && chunks >= minChunks && EventHandle.classify(clientEvent) instanceof EventHandle.CudaEvent event && !event.none();
    }

    /**
     * Handler thread: the task that opens {@code handle} (for the poller's thread to run), or null when no open is posted
     * (one for the same handle is waiting); when {@link #MAX_SLOTS} wait, a task that only sweeps, or null while one is posted.
     */
    Runnable post(byte[] handle) {
        if (slots.size() >= MAX_SLOTS) {
            // full of events nobody took: only an open sweeps, so one sweep is posted instead (one at a time)
            return sweepPosted.compareAndSet(false, true) ? () -> {
                sweepPosted.set(false);
                sweep();
            } : null;
        }
        Slot<E> slot = new Slot<>(handle.clone(), clockNs.getAsLong());
        if (slots.putIfAbsent(slot.key, slot) != null) {
            return null;
        }
        return () -> open(slot);
    }

    /** Poller thread: sweeps what waited too long, then opens the slot's event unless its transfer took the slot first. */
    private void open(Slot<E> slot) {
        sweep();
        if (!slot.state.compareAndSet(QUEUED, OPENING)) {
            return;
        }
        try {
            slot.event = driver.open(slot.handle);
            slot.state.set(OPEN);
        } catch (RuntimeException e) {
            // the transfer opens the handle itself and reports the driver's refusal as it always did
            slot.state.set(FAILED);
            slots.remove(slot.key, slot);
        }
    }

    /**
     * Lane thread, as the transfer starts: the event opened for {@code handle}, now the caller's (it destroys it with the
     * transfer); or null, and the caller opens the handle itself. Waits only for an open the poller has begun.
     */
    E take(byte[] handle) {
        if (slots.isEmpty()) {
            return null;
        }
        Slot<E> slot = slots.remove(key(handle));
        if (slot == null || slot.state.compareAndSet(QUEUED, GONE)) {
            return null;
        }
        while (slot.state.get() == OPENING) {
            Thread.onSpinWait(); // the driver call under way on the poller's thread: tens of microseconds
        }
        return slot.state.get() == OPEN ? slot.event : null;
    }

    /** Poller thread: destroys the events of slots older than {@link #UNCLAIMED_NS}; returns how many slots it dropped. */
    int sweep() {
        long nowNs = clockNs.getAsLong();
        int dropped = 0;
        for (Slot<E> slot : slots.values()) {
            if (nowNs - slot.postedNs > UNCLAIMED_NS && slots.remove(slot.key, slot)) {
                drop(slot);
                dropped++;
            }
        }
        return dropped;
    }

    /** Engine close (no transfer starts any more, the poller runs no task): destroys every event still waiting. */
    void close() {
        for (Slot<E> slot : slots.values()) {
            if (slots.remove(slot.key, slot)) {
                drop(slot);
            }
        }
    }

    /** Handles waiting (tests). */
    int waiting() {
        return slots.size();
    }

    private static String key(byte[] handle) {
        return new String(handle, StandardCharsets.ISO_8859_1);
    }

    private void drop(Slot<E> slot) {
        if (!slot.state.compareAndSet(QUEUED, GONE) && slot.state.get() == OPEN) {
            driver.destroy(slot.event);
        }
    }
}
