package io.lmcache.server.l2.redis;

import io.netty.buffer.AbstractByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.UnpooledUnsafeDirectByteBuf;
import io.netty.util.internal.CleanableDirectBuffer;
import io.netty.util.internal.PlatformDependent;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;

/**
 * The allocator of the adapter's Netty channels, which keeps the large buffers that values pass
 * through for the next value. Lettuce copies a SET's value into the buffer it encodes the command
 * in, and a GET's reply accumulates in its read buffer; at chunk-object sizes (tens of MiB) both
 * are past the largest size Netty's own allocators pool, so each value got a freshly mapped
 * buffer, and touching that memory for the first time cost more than the copy itself
 * (bench/RESULTS.md#l2-tiers). Here a buffer that grows to {@link #LARGE_BYTES} or more takes a
 * kept one of its size class when there is one, and gives it back when Netty frees it.
 *
 * <p>Bounded: at most {@code keep} buffers are kept ({@code num_workers}: the window lets that
 * many values be on the wire at once, so a burst's buffers serve the next burst), each no larger
 * than the largest value plus Netty's growth step, and a kept buffer unused for {@link #IDLE_NS}
 * is freed by {@link #trimIdle} (the adapter's scheduler calls it). Direct memory thus peaks at
 * about twice the window's values (those on the wire and as many kept) plus each connection's
 * read buffer. Small buffers, socket reads among them, stay with Netty's pooled allocator.
 *
 * <p>Uses Netty's {@code CleanableDirectBuffer} (an internal interface of netty-common 4.2):
 * {@code UnpooledDirectByteBuf} grows through {@code allocateDirectBuffer(int)} and frees through
 * it; {@code ValueBuffersTest} fails if a Netty upgrade changes that path.
 */
final class ValueBuffers extends AbstractByteBufAllocator {
    /** Netty grows a buffer past 4 MiB in 4 MiB steps: requests from here up are multiples of it, one size class each. */
    static final int LARGE_BYTES = 4 << 20;
    static final long IDLE_NS = 30_000_000_000L;

    private final ByteBufAllocator small;
    private final int keep;
    /** Kept buffers, least recently given back first. */
    private final ArrayDeque<Kept> idle = new ArrayDeque<>();
    private final LongAdder reused = new LongAdder();
    private final LongAdder made = new LongAdder();
    private final LongAdder freed = new LongAdder();
    private boolean closed;

    private record Kept(CleanableDirectBuffer memory, long idleSinceNs) {}

    ValueBuffers(ByteBufAllocator small, int keep) {
        super(true);
        this.small = small;
        this.keep = keep;
    }

    @Override
    protected ByteBuf newDirectBuffer(int initialCapacity, int maxCapacity) {
        if (!PlatformDependent.hasUnsafe()) {
            return small.directBuffer(initialCapacity, maxCapacity); // no recycling without Netty's unsafe buffers
        }
        if (initialCapacity < LARGE_BYTES) {
            return new Growing(this, initialCapacity, maxCapacity);
        }
        // made empty, then grown: growing goes through allocateDirectBuffer, so a kept buffer serves it (nothing to copy over)
        Growing buffer = new Growing(this, 0, maxCapacity);
        buffer.capacity(initialCapacity);
        return buffer;
    }

    /** Socket reads ask with a size guess (at most 64 KiB): pooled by Netty. */
    @Override
    public ByteBuf ioBuffer(int initialCapacity) {
        return initialCapacity >= LARGE_BYTES ? super.ioBuffer(initialCapacity) : small.ioBuffer(initialCapacity);
    }

    @Override
    protected ByteBuf newHeapBuffer(int initialCapacity, int maxCapacity) {
        return small.heapBuffer(initialCapacity, maxCapacity);
    }

    @Override
    public boolean isDirectBufferPooled() {
        return false;
    }

    /** A buffer of at least {@code bytes} (a multiple of {@link #LARGE_BYTES} from there up): a kept one of that class, else new. */
    CleanableDirectBuffer take(int bytes) {
        int size = sizeClass(bytes);
        synchronized (this) {
            for (Iterator<Kept> it = idle.descendingIterator(); it.hasNext();) {
                Kept kept = it.next();
                if (kept.memory().buffer().capacity() == size) {
                    it.remove();
                    reused.increment();
                    return new Lent(this, kept.memory(), bytes);
                }
            }
        }
        made.increment();
        return new Lent(this, PlatformDependent.allocateDirect(size, false), bytes);
    }

    /** Keeps a buffer Netty freed, or frees it when {@code keep} are kept already or the allocator is closed (then the oldest goes). */
    void giveBack(CleanableDirectBuffer memory, long nowNs) {
        CleanableDirectBuffer drop = memory;
        synchronized (this) {
            if (!closed && keep > 0) {
                idle.addLast(new Kept(memory, nowNs));
                drop = idle.size() > keep ? idle.pollFirst().memory() : null;
            }
        }
        free(drop);
    }

    /** Frees the kept buffers unused for {@link #IDLE_NS}. */
    void trimIdle(long nowNs) {
        while (true) {
            CleanableDirectBuffer drop;
            synchronized (this) {
                Kept oldest = idle.peekFirst();
                if (oldest == null || nowNs - oldest.idleSinceNs() < IDLE_NS) {
                    return;
                }
                drop = idle.pollFirst().memory();
            }
            free(drop);
        }
    }

    /** Frees every kept buffer; buffers still in Netty's hands are freed when Netty gives them back. */
    void close() {
        ArrayDeque<Kept> all;
        synchronized (this) {
            closed = true;
            all = new ArrayDeque<>(idle);
            idle.clear();
        }
        all.forEach(kept -> free(kept.memory()));
    }

    /** For {@code /status}: buffers and bytes kept, and how many values took a kept buffer or a new one. */
    Map<String, Object> status() {
        Map<String, Object> status = new LinkedHashMap<>();
        synchronized (this) {
            status.put("kept", idle.size());
            status.put("kept_bytes", idle.stream().mapToLong(kept -> kept.memory().buffer().capacity()).sum());
        }
        status.put("keep_max", keep);
        status.put("reused_total", reused.sum());
        status.put("allocated_total", made.sum());
        status.put("freed_total", freed.sum());
        return status;
    }

    static int sizeClass(int bytes) {
        long rounded = ((long) bytes + LARGE_BYTES - 1) / LARGE_BYTES * LARGE_BYTES;
        return (int) Math.min(rounded, Integer.MAX_VALUE - 8); // the largest direct buffer Java makes
    }

    private void free(CleanableDirectBuffer memory) {
        if (memory != null) {
            memory.clean();
            freed.increment();
        }
    }

    /** Netty's own unpooled buffer, except that growing to a large size takes its memory from the allocator that made it. */
    private static final class Growing extends UnpooledUnsafeDirectByteBuf {
        Growing(ValueBuffers owner, int initialCapacity, int maxCapacity) {
            super(owner, initialCapacity, maxCapacity);
        }

        @Override
        protected CleanableDirectBuffer allocateDirectBuffer(int capacity) {
            return capacity >= LARGE_BYTES ? ((ValueBuffers) alloc()).take(capacity) : super.allocateDirectBuffer(capacity);
        }
    }

    /**
     * A kept buffer seen through a view of the size asked for: Netty takes a buffer's capacity from its view and calls
     * {@code buffer()} several times while growing, so the view is made once. Netty calls {@code clean()} once, when the
     * buffer grows again or is released.
     */
    private static final class Lent implements CleanableDirectBuffer {
        private final ValueBuffers owner;
        private final CleanableDirectBuffer memory;
        private final ByteBuffer view;
        private boolean given;

        Lent(ValueBuffers owner, CleanableDirectBuffer memory, int bytes) {
            this.owner = owner;
            this.memory = memory;
            this.view = memory.buffer().slice(0, bytes);
        }

        @Override
        public ByteBuffer buffer() {
            return view;
        }

        @Override
        public void clean() {
            synchronized (this) {
                if (given) {
                    return; // kept twice would lend one buffer to two values
                }
                given = true;
            }
            owner.giveBack(memory, System.nanoTime());
        }
    }
}
