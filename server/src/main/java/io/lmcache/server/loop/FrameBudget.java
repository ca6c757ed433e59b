package io.lmcache.server.loop;

import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.metrics.ZeromqCatalogue;
import java.lang.ref.PhantomReference;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;
import java.nio.ByteBuffer;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;
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
 * <p>The budget is shared fairly (issue 31): sixteen connections that each declared a 16 MiB frame and
 * stalled used to hold all of it, and every frame over 4 KiB failed until they closed (prompts over
 * about 950 tokens, REGISTERs over about 16 layers). Now frames longer than {@link #MEDIUM_FRAME_BYTES}
 * may hold only the budget less a reserve ({@link #reserveBytes}) that only the shorter frames of real
 * requests take: a REGISTER of thousands of layers, the key of a 200 000-token prompt. A connection
 * holds at most one frame that is still arriving (JeroMQ's decoder reads one at a time), so its
 * share of the budget is that frame and what it has queued; one that completes no message for the
 * stall timeout is closed by {@link ConnectionMonitor}, and the frame it left is given back and
 * counted ({@code lmcache_mp_zeromq_frames_abandoned_total}).
 *
 * <p>Issue 45 (N4): 260 connections each declaring a 1 MiB frame and sending 1 KiB held the whole budget, since
 * frames up to 1 MiB could take all of it, and every frame over 4 KiB failed. A frame cannot be charged only as
 * its bytes arrive: JeroMQ's ZMTP engine always decodes with its {@code V2Decoder}, which asks this allocator for
 * the whole frame as soon as the length arrives and then reads into that buffer (the {@code ZMQ_DECODER} option,
 * which could plug a growing decoder, is used only by raw STREAM sockets, and the allocator is not told which
 * connection asks); a buffer committed page by page as bytes arrive would need memory outside the heap that the JDK
 * gives back late. So the charge stays the declared length (what the heap really holds), and what stalled frames
 * can take is bounded by size tiers and by time:
 * <ul>
 * <li>Three tiers: frames up to {@link #SHARE_FRAME_BYTES} (a REGISTER of dozens of layers, a key of some 10 000
 *     tokens) may use the whole budget; frames up to {@link #MEDIUM_FRAME_BYTES} all but a reserve of their own
 *     ({@link #shareReserveBytes}); longer frames all but that and the medium reserve ({@link #reserveBytes}). A flood
 *     of stalled 1 MiB frames leaves the short frames of real requests their reserve; a flood of short frames needs
 *     {@code reserve / 64 KiB} connections stalled at once.
 * <li>Progress: the decoder reads into the buffer this allocator made ({@link Budgeted#buf}), so the bytes that have
 *     arrived are known. A frame whose bytes stopped coming for {@link #MID_FRAME_STALL_NS} is stalled; while one is,
 *     {@link ConnectionMonitor} closes within a few seconds every connection that has completed nothing (neither a
 *     message nor a heartbeat answer, which an idle client sends every second), and its frame goes back to the budget.
 * </ul>
 * Connections that stall mid-frame over and over are thus held to a few seconds each, and short requests keep
 * their room meanwhile.
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
    /**
     * Frames up to this size may use the whole budget, longer ones all but the reserve: the requests that must
     * get through an attack of stalled maximal frames are short (a REGISTER sends about 420 bytes a layer tensor,
     * a key about 5 bytes a token).
     */
    static final int MEDIUM_FRAME_BYTES = 1 << 20;
    /** Frames up to this size have a reserve that longer frames cannot take: what real requests send besides STORE keys. */
    static final int SHARE_FRAME_BYTES = 64 << 10;
    /** A frame whose bytes have not advanced for this long is stalled mid-frame (a real sender's frame moves every ms). */
    static final long MID_FRAME_STALL_NS = TimeUnit.SECONDS.toNanos(2);
    /** The health check reports the budget exhausted for this long after a frame did not fit. */
    static final long EXHAUSTED_WINDOW_NS = TimeUnit.SECONDS.toNanos(5);
    /** When frames are over budget while some may be garbage, ask for a collection at most this often. */
    private static final long COLLECT_INTERVAL_NS = TimeUnit.SECONDS.toNanos(1);

    private final long budgetBytes;
    private final long reserveBytes;
    private final long shareReserveBytes;
    private final int maxFrameBytes;
    /** When a frame last did not fit (any thread reads it: the health check). */
    private volatile long lastOverBudgetNs = System.nanoTime() - 2 * EXHAUSTED_WINDOW_NS;
    private final AtomicLong reservedBytes = new AtomicLong();
    private final ReferenceQueue<Msg> unreachable = new ReferenceQueue<>();
    /** Keeps each outstanding frame's reference reachable until it is released or enqueued. */
    private final Set<Reservation> outstanding = ConcurrentHashMap.newKeySet();
    private final LongAdder overBudget;
    private final LongAdder abandoned;
    private final Consumer<Metadata> messageEnded;
    private final RateLimitedLog overBudgetLog = new RateLimitedLog(LOG, "frames over the ZeroMQ frame budget", 1);
    private final ByteBuffer sink;
    private final PartLimit parts;
    private long lastCollectNs = System.nanoTime() - COLLECT_INTERVAL_NS;
    private volatile boolean failNext;

    /** {@code messageEnded} hears, on the I/O thread, of each last frame of a message (commands included) and its connection. */
    FrameBudget(long budgetBytes, long maxFrameBytes, ServerMetrics metrics, Consumer<Metadata> messageEnded) {
        this.budgetBytes = budgetBytes;
        this.reserveBytes = reserveBytes(budgetBytes);
        this.shareReserveBytes = shareReserveBytes(budgetBytes);
        this.maxFrameBytes = (int) Math.min(maxFrameBytes, Integer.MAX_VALUE - 8);
        this.messageEnded = messageEnded;
        // the cap (setMaxMsgSize) is below 2 GiB, so a sink of the cap fits any frame JeroMQ accepts
        sink = ByteBuffer.allocate((int) Math.min(maxFrameBytes, Integer.MAX_VALUE - 8));
        abandoned = metrics.declare(ZeromqCatalogue.FRAMES_ABANDONED);
        parts = new PartLimit(metrics.declare(ZeromqCatalogue.MESSAGES_CUT));
        overBudget = metrics.declare(ZeromqCatalogue.FRAMES_OVER_BUDGET);
        // runs on: lmcache-http-* (each scrape)
        metrics.gauge(ZeromqCatalogue.FRAME_BYTES_HELD, reservedBytes::get);
    }

    /**
     * A quarter of the heap (as much again is for the payloads of requests in flight, {@link RequestLoop}), and at
     * least two maximal frames, so one client's longest request always fits when no one floods.
     */
    static FrameBudget forHeap(long maxMessageBytes, ServerMetrics metrics, Consumer<Metadata> messageEnded) {
        long heapBytes = Runtime.getRuntime().maxMemory();
        long budgetBytes = Math.max(heapBytes / 4, 2 * maxMessageBytes);
        if (budgetBytes > heapBytes / 3) {
            LOG.warn("--max-message-mb {}: two frames that long take {} MiB of the {} MiB heap; raise -Xmx (LMCACHE_JAVA_OPTS)",
                    maxMessageBytes >> 20, budgetBytes >> 20, heapBytes >> 20);
        }
        LOG.info("ZeroMQ frames over {} bytes share a budget of {} MiB ({} frames of the {} MiB cap); {} MiB of it only for frames up to "
                + "{} KiB", SMALL_FRAME_BYTES, budgetBytes >> 20, budgetBytes / maxMessageBytes, maxMessageBytes >> 20,
                reserveBytes(budgetBytes) >> 20, MEDIUM_FRAME_BYTES >> 10);
        return new FrameBudget(budgetBytes, maxMessageBytes, metrics, messageEnded);
    }

    /** A quarter of the budget, at least eight medium frames. */
    static long reserveBytes(long budgetBytes) {
        return Math.min(budgetBytes / 2, Math.max(budgetBytes / 4, 8L * MEDIUM_FRAME_BYTES));
    }

    /** An eighth of the budget, at least 64 short frames (within the medium reserve's share of a small budget). */
    static long shareReserveBytes(long budgetBytes) {
        return Math.min(budgetBytes / 4, Math.max(budgetBytes / 8, 64L * SHARE_FRAME_BYTES));
    }

    /** What frames of {@code size} may hold in all: the budget less the reserves of the shorter tiers. */
    long limitBytes(int size) {
        if (size <= SHARE_FRAME_BYTES) {
            return budgetBytes;
        }
        return budgetBytes - shareReserveBytes - (size > MEDIUM_FRAME_BYTES ? reserveBytes : 0);
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
            return new Frame(size, this);
        }
        releaseUnreachable();
        long limitBytes = limitBytes(size);
        if (!reserve(size, limitBytes)) {
            maybeCollect();
            releaseUnreachable();
            if (!reserve(size, limitBytes)) {
                overBudget.increment();
                lastOverBudgetNs = System.nanoTime();
                overBudgetLog.warn("a {}-byte frame does not fit the ZeroMQ frame budget ({} of {} bytes held): its request gets its "
                        + "failure value (many connections are mid-way through long frames)", size, reservedBytes.get(), budgetBytes);
                return new OverBudget(sink.slice(0, size), this);
            }
        }
        Budgeted frame = new Budgeted(size, this);
        frame.reservation = new Reservation(frame, size, this);
        return frame;
    }

    private boolean reserve(long size, long limitBytes) {
        long held;
        do {
            held = reservedBytes.get();
            if (held + size > limitBytes) {
                return false;
            }
        } while (!reservedBytes.compareAndSet(held, held + size));
        return true;
    }

    /** The frames whose buffers the collector found unreachable give their bytes back. Any thread. */
    void releaseUnreachable() {
        Reference<? extends Msg> ref;
        while ((ref = unreachable.poll()) != null) {
            if (((Reservation) ref).release()) {
                abandoned.increment();
            }
        }
    }

    /**
     * Runs on: lmcache-connection-monitor, after it closed stalled connections: their frames are garbage once
     * JeroMQ has torn the connections down; a collection finds them, so the budget does not wait for one.
     */
    void collectAbandoned() {
        if (!outstanding.isEmpty()) {
            System.gc();
        }
        releaseUnreachable();
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
     * Null, or why the budget counts as exhausted now (the health check): a frame of the longest size the server accepts
     * would not fit, or a frame did not fit within the last few seconds.
     */
    String exhausted() {
        long held = reservedBytes.get();
        boolean full = held + maxFrameBytes > limitBytes(maxFrameBytes);
        if (!full && System.nanoTime() - lastOverBudgetNs >= EXHAUSTED_WINDOW_NS) {
            return null;
        }
        return "the ZeroMQ frame budget is exhausted (" + (held >> 20) + " of " + (budgetBytes >> 20)
                + " MiB held by frames still arriving or queued): requests with long frames fail";
    }

    /**
     * Runs on: lmcache-connection-monitor (each sweep). How many budgeted frames are stalled mid-frame: allocated, not
     * complete, and no byte arrived for {@link #MID_FRAME_STALL_NS}.
     */
    int stalledFrames(long nowNs) {
        int stalled = 0;
        for (Reservation reservation : outstanding) {
            if (reservation.stalled(nowNs)) {
                stalled++;
            }
        }
        return stalled;
    }

    /**
     * One frame's bytes in the budget; given back exactly once, by the loop or when the collector finds the frame
     * unreachable (a frame the loop never took: the array is then garbage too).
     */
    private static final class Reservation extends PhantomReference<Msg> {
        private final long bytes;
        private final FrameBudget owner;
        /** The decoder's view of the frame (it reads into it): its position is the bytes arrived; dropped on release. */
        private volatile ByteBuffer view;
        private volatile boolean complete;
        /** The monitor's: the position seen last and when it last moved. */
        private int lastPosition = -1;
        private long lastProgressNs;

        Reservation(Msg frame, long bytes, FrameBudget owner) {
            super(frame, owner.unreachable);
            this.bytes = bytes;
            this.owner = owner;
            owner.outstanding.add(this);
        }

        /** Monitor thread: no byte of this unfinished frame arrived for {@link #MID_FRAME_STALL_NS}. */
        boolean stalled(long nowNs) {
            ByteBuffer reading = view;
            if (complete || reading == null) {
                return false;
            }
            int position = reading.position(); // a racy read of a plain field: a stale value only delays the verdict
            if (position != lastPosition) {
                lastPosition = position;
                lastProgressNs = nowNs;
                return false;
            }
            return nowNs - lastProgressNs > MID_FRAME_STALL_NS;
        }

        /** True when this call gave the bytes back (the first). */
        boolean release() {
            if (owner.outstanding.remove(this)) {
                clear();
                view = null;
                owner.reservedBytes.addAndGet(-bytes);
                return true;
            }
            return false;
        }
    }

    /** Every frame this allocator makes: the engine sets the connection's metadata on it just before it is queued. */
    private static class Frame extends Msg {
        private final FrameBudget owner;

        Frame(int size, FrameBudget owner) {
            super(size);
            this.owner = owner;
        }

        Frame(ByteBuffer buffer, FrameBudget owner) {
            super(buffer);
            this.owner = owner;
        }

        @Override
        public Msg setMetadata(Metadata metadata) {
            super.setMetadata(metadata);
            if (metadata != null) {
                owner.parts.arrived(this, metadata);
                if (!hasMore()) {
                    owner.messageEnded.accept(metadata);
                }
            }
            return this;
        }
    }

    /** A frame inside the budget; its reservation is set right after construction (it refers to the frame). */
    private static final class Budgeted extends Frame {
        private Reservation reservation;

        Budgeted(int size, FrameBudget owner) {
            super(size, owner);
        }

        /** The decoder's first call (right after the allocation) gets the view it reads the frame into: kept, to see progress. */
        @Override
        public ByteBuffer buf() {
            ByteBuffer view = super.buf();
            Reservation own = reservation;
            if (own != null && own.view == null && !own.complete) {
                own.view = view;
            }
            return view;
        }

        @Override
        public Msg setMetadata(Metadata metadata) {
            Reservation own = reservation;
            if (own != null) {
                own.complete = true; // the engine sets it once the frame has arrived whole
                own.view = null;
            }
            return super.setMetadata(metadata);
        }
    }

    /** A frame read into the shared sink: its bytes are garbage, its request is answered with its failure value. */
    private static final class OverBudget extends Frame {
        OverBudget(ByteBuffer view, FrameBudget owner) {
            super(view, owner);
        }
    }
}
