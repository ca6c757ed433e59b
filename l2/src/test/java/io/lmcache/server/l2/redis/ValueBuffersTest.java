package io.lmcache.server.l2.redis;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.PooledByteBufAllocator;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The value buffers as Lettuce uses them: a command buffer that starts small and grows to a value's size as the value is
 * written, released once sent. What is asserted is the allocator's counts and the bytes, so a Netty upgrade that stops
 * growing through {@code allocateDirectBuffer(int)} fails here rather than silently allocating every value anew.
 */
class ValueBuffersTest {
    private static final int VALUE = 9 << 20;

    @Test
    void aGrownBufferIsKeptAndServesTheNextValueOfItsSize() {
        ValueBuffers buffers = new ValueBuffers(PooledByteBufAllocator.DEFAULT, 4);
        long first = sendValue(buffers, (byte) 1);
        long second = sendValue(buffers, (byte) 2);
        Map<String, Object> status = buffers.status();
        assertEquals(first, second, "the second value reused the first one's memory");
        assertEquals(1L, status.get("allocated_total"));
        assertEquals(1L, status.get("reused_total"));
        assertEquals(1, status.get("kept"));
        assertEquals((long) ValueBuffers.sizeClass(VALUE + 64), status.get("kept_bytes"));
        buffers.close();
        assertEquals(0, buffers.status().get("kept"));
        assertEquals(1L, buffers.status().get("freed_total"));
    }

    @Test
    void atMostKeepBuffersAreKeptAndIdleOnesAreFreed() {
        ValueBuffers buffers = new ValueBuffers(PooledByteBufAllocator.DEFAULT, 2);
        List<ByteBuf> inFlight = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            inFlight.add(grown(buffers, (byte) i));
        }
        inFlight.forEach(ByteBuf::release);
        assertEquals(2, buffers.status().get("kept"));
        assertEquals(3L, buffers.status().get("allocated_total"));
        assertEquals(1L, buffers.status().get("freed_total"));
        buffers.trimIdle(System.nanoTime());
        assertEquals(2, buffers.status().get("kept"), "not idle long enough yet");
        buffers.trimIdle(System.nanoTime() + ValueBuffers.IDLE_NS + 1);
        assertEquals(0, buffers.status().get("kept"));
        assertEquals(3L, buffers.status().get("freed_total"));
    }

    @Test
    void aBufferReleasedAfterCloseIsFreedNotKept() {
        ValueBuffers buffers = new ValueBuffers(PooledByteBufAllocator.DEFAULT, 2);
        ByteBuf value = grown(buffers, (byte) 5);
        buffers.close();
        value.release();
        assertEquals(0, buffers.status().get("kept"));
        assertEquals(1L, buffers.status().get("freed_total"));
    }

    @Test
    void aLargeFirstAskIsServedFromTheKeptBuffersToo() {
        ValueBuffers buffers = new ValueBuffers(PooledByteBufAllocator.DEFAULT, 2);
        ByteBuf large = buffers.directBuffer(VALUE);
        assertEquals(VALUE, large.capacity());
        large.release();
        ByteBuf again = buffers.buffer(VALUE);
        assertEquals(1L, buffers.status().get("reused_total"));
        again.release();
    }

    /** Socket reads (a size guess) and heap buffers stay with Netty's pooled allocator. */
    @Test
    void smallReadsAndHeapBuffersStayWithNettysAllocator() {
        ByteBufAllocator pooled = PooledByteBufAllocator.DEFAULT;
        ValueBuffers buffers = new ValueBuffers(pooled, 2);
        ByteBuf read = buffers.ioBuffer(65_536);
        ByteBuf heap = buffers.heapBuffer(1024);
        assertSame(pooled, read.alloc());
        assertSame(pooled, heap.alloc());
        ByteBuf command = buffers.ioBuffer();
        assertNotSame(pooled, command.alloc(), "a command's buffer is ours: it may grow to a value's size");
        read.release();
        heap.release();
        command.release();
    }

    /** A command buffer as Lettuce's encoder makes it: ioBuffer(), a header, then the value written into it; returns its address. */
    private static long sendValue(ValueBuffers buffers, byte fill) {
        ByteBuf command = grown(buffers, fill);
        long address = command.memoryAddress();
        command.release();
        return address;
    }

    private static ByteBuf grown(ValueBuffers buffers, byte fill) {
        ByteBuf command = buffers.ioBuffer();
        command.writeBytes(new byte[64]);
        byte[] value = new byte[VALUE];
        Arrays.fill(value, fill);
        command.writeBytes(value);
        assertTrue(command.capacity() >= VALUE + 64);
        for (int i = 64; i < VALUE + 64; i += 1 << 20) {
            assertEquals(fill, command.getByte(i), "the value's bytes at " + i);
        }
        return command;
    }
}
