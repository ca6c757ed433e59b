package io.lmcache.server.loop;

import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.metrics.ServerMetrics;
import java.lang.ref.PhantomReference;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;
import java.nio.ByteBuffer;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import zmq.Msg;
import zmq.io.Metadata;
import zmq.msg.MsgAllocator;

/**
 * The ROUTER's frame allocator: one byte budget for every frame longer than {@link #SMALL_FRAME_BYTES}
 * that the server holds before the request loop has taken it, whether still arriving (JeroMQ
 * allocates a frame whole when its length arrives, so a peer that declares 16 MiB and sends 100 bytes
 * holds 16 MiB) or queued in a connection's pipe. Before this, about 80 idle connections declaring
 * maximal frames exhausted memory and killed JeroMQ's I/O thread. Frames are heap arrays (JeroMQ's
 * default put long ones in direct memory, which the JDK hands back to the system late, if at all),
 * and the request loop takes a frame's array as it is, without a copy.
 *
 * <p>A frame that does not fit is not refused (the decoder cannot fail an allocation without killing
 * its thread): it is read into one shared sink buffer that many such frames scribble over, marked
 * over budget, and the request it belongs to is answered with its failure value. So a flood costs
 * the flooders their requests and the server nothing, and every request still gets a reply.
 *
 * <p>The request loop gives a frame's bytes back as soon as it has taken it ({@link #release}); frames
 * that never reach it (their connection closed mid-frame or with a full pipe) are given back when the
 * collector finds them unreachable. Allocation runs on JeroMQ's I/O thread, release on the loop's.
 */
final class FrameBudget implements MsgAllocator {
    private static final Logger LOG = LoggerFactory.getLogger(FrameBudget.class);
    /**
     * Frames up to this size are plain heap buffers outside the budget: every request's uid and op
     * frames and most payloads. What they can hold is bounded per connection by the receive high-water
     * mark ({@link RequestLoop}) times this size.
     */
    static final int SMALL_FRAME_BYTES = 4096;
    /** When frames are over budget while some may be garbage, ask for a collection at most this often. */
    private static final long COLLECT_INTERVAL_NS = TimeUnit.SECONDS.toNanos(1);

    private final long budgetBytes;
    private final AtomicLong reservedBytes = new AtomicLong();
    private final ReferenceQueue<Msg> unreachable = new ReferenceQueue<>();
    /** Keeps each outstanding frame's reference reachable until it is released or enqueued. */
    private final Set<Reservation> outstanding = ConcurrentHashMap.newKeySet();
    private final LongAdder overBudget;
    private final RateLimitedLog overBudgetLog = new RateLimitedLog(LOG, "frames over the ZeroMQ frame budget", 1);
    private final ByteBuffer sink;
    private final PartLimit parts;
    private long lastCollectNs = System.nanoTime() - COLLECT_INTERVAL_NS;
    private volatile boolean failNext;

    FrameBudget(long budgetBytes, long maxFrameBytes, ServerMetrics metrics) {
        this.budgetBytes = budgetBytes;
        // the cap (setMaxMsgSize) is below 2 GiB, so a sink of the cap fits any frame JeroMQ accepts
        sink = ByteBuffer.allocate((int) Math.min(maxFrameBytes, Integer.MAX_VALUE - 8));
        parts = new PartLimit(metrics.declare("lmcache_mp.zeromq_messages_cut",
                "messages ended by the server at " + PartLimit.MAX_PARTS + " frames (a peer that never sends a last frame)"));
        overBudget = metrics.declare("lmcache_mp.zeromq_frames_over_budget",
                "frames over the ZeroMQ frame budget (many connections mid-way through long frames): their requests get their failure value");
        // runs on: lmcache-http-* (each scrape)
        metrics.gauge("lmcache_mp.zeromq_frame_bytes_held", "bytes of long frames received and not yet copied by the request loop",
                reservedBytes::get);
    }

    /**
     * A quarter of the heap (as much again is for the payloads of requests in flight, {@link RequestLoop}), and at
     * least two maximal frames, so one client's longest request always fits when no one floods.
     */
    static FrameBudget forHeap(long maxMessageBytes, ServerMetrics metrics) {
        long heapBytes = Runtime.getRuntime().maxMemory();
        long budgetBytes = Math.max(heapBytes / 4, 2 * maxMessageBytes);
        if (budgetBytes > heapBytes / 3) {
            LOG.warn("--max-message-mb {}: two frames that long take {} MiB of the {} MiB heap; raise -Xmx (LMCACHE_JAVA_OPTS)",
                    maxMessageBytes >> 20, budgetBytes >> 20, heapBytes >> 20);
        }
        LOG.info("ZeroMQ frames over {} bytes share a budget of {} MiB ({} frames of the {} MiB cap)", SMALL_FRAME_BYTES,
                budgetBytes >> 20, budgetBytes / maxMessageBytes, maxMessageBytes >> 20);
        return new FrameBudget(budgetBytes, maxMessageBytes, metrics);
    }

    long budgetBytes() {
        return budgetBytes;
    }

    /** Runs on: a JeroMQ I/O thread (the decoder, when a frame's length has arrived). */
    @Override
    public Msg allocate(int size) {
        if (failNext) {
            failNext = false;
            // the test hook: what a real exhaustion of memory did to this thread before the budget existed
            throw new OutOfMemoryError("test hook: frame allocation failed");
        }
        if (size <= SMALL_FRAME_BYTES) {
            return new Frame(size, parts);
        }
        releaseUnreachable();
        if (!reserve(size)) {
            maybeCollect();
            releaseUnreachable();
            if (!reserve(size)) {
                overBudget.increment();
                overBudgetLog.warn("a {}-byte frame does not fit the ZeroMQ frame budget ({} of {} bytes held): its request gets its "
                        + "failure value (many connections are mid-way through long frames)", size, reservedBytes.get(), budgetBytes);
                return new OverBudget(sink.slice(0, size), parts);
            }
        }
        Budgeted frame = new Budgeted(size, parts);
        frame.reservation = new Reservation(frame, size, this);
        return frame;
    }

    private boolean reserve(long size) {
        long held;
        do {
            held = reservedBytes.get();
            if (held + size > budgetBytes) {
                return false;
            }
        } while (!reservedBytes.compareAndSet(held, held + size));
        return true;
    }

    /** The frames whose buffers the collector found unreachable give their bytes back. */
    private void releaseUnreachable() {
        Reference<? extends Msg> ref;
        while ((ref = unreachable.poll()) != null) {
            ((Reservation) ref).release();
        }
    }

    /** Frames abandoned mid-way hold their bytes until a collection finds them: ask for one, rarely. */
    private void maybeCollect() {
        long nowNs = System.nanoTime();
        if (!outstanding.isEmpty() && nowNs - lastCollectNs - COLLECT_INTERVAL_NS > 0) {
            lastCollectNs = nowNs;
            System.gc();
        }
    }

    /** Runs on: lmcache-request-loop, once it has copied the frame; a frame outside the budget is ignored. */
    static void release(Msg msg) {
        if (msg instanceof Budgeted budgeted) {
            budgeted.reservation.release();
        }
    }

    /**
     * The frame's bytes for the request loop: a budgeted or small frame's own array (JeroMQ's data() returns it
     * without a copy); for a frame over budget, whose bytes are garbage, a short stand-in that is still longer
     * than any uid or op frame when the frame was, so the envelope checks judge it by its real length.
     */
    static byte[] bytes(Msg msg, int envelopeLimit) {
        return msg instanceof OverBudget ? new byte[Math.min(msg.size(), envelopeLimit + 1)] : msg.data();
    }

    static boolean isOverBudget(Msg msg) {
        return msg instanceof OverBudget;
    }

    /** Test hook: the next frame allocation fails as an exhausted direct memory did (the I/O thread dies). */
    void failNextAllocation() {
        failNext = true;
    }

    long heldBytes() {
        return reservedBytes.get();
    }

    /**
     * One frame's bytes in the budget; given back exactly once, by the loop or when the collector finds the frame
     * unreachable (a frame the loop never took: the array is then garbage too).
     */
    private static final class Reservation extends PhantomReference<Msg> {
        private final long bytes;
        private final FrameBudget owner;

        Reservation(Msg frame, long bytes, FrameBudget owner) {
            super(frame, owner.unreachable);
            this.bytes = bytes;
            this.owner = owner;
            owner.outstanding.add(this);
        }

        void release() {
            if (owner.outstanding.remove(this)) {
                clear();
                owner.reservedBytes.addAndGet(-bytes);
            }
        }
    }

    /** Every frame this allocator makes: the engine sets the connection's metadata on it just before it is queued. */
    private static class Frame extends Msg {
        private final PartLimit parts;

        Frame(int size, PartLimit parts) {
            super(size);
            this.parts = parts;
        }

        Frame(ByteBuffer buffer, PartLimit parts) {
            super(buffer);
            this.parts = parts;
        }

        @Override
        public Msg setMetadata(Metadata metadata) {
            super.setMetadata(metadata);
            if (metadata != null) {
                parts.arrived(this, metadata);
            }
            return this;
        }
    }

    /** A frame inside the budget; its reservation is set right after construction (it refers to the frame). */
    private static final class Budgeted extends Frame {
        private Reservation reservation;

        Budgeted(int size, PartLimit parts) {
            super(size, parts);
        }
    }

    /** A frame read into the shared sink: its bytes are garbage, its request is answered with its failure value. */
    private static final class OverBudget extends Frame {
        OverBudget(ByteBuffer view, PartLimit parts) {
            super(view, parts);
        }
    }
}
