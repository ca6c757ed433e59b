package io.lmcache.server.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.HexFormat;
import org.junit.jupiter.api.Test;

/** The 81-byte timeline-semaphore payload ({@code struct "!B64sQQ"}) and the classification of every handle by length. */
class EventHandleTest {
    private static byte[] memHandle() {
        byte[] handle = new byte[64];
        for (int i = 0; i < 64; i++) {
            handle[i] = (byte) (i * 7 + 1);
        }
        return handle;
    }

    /** What LMCache's {@code _EXPORT_STRUCT.pack(version, handle, slot_offset, seq)} writes, built by hand. */
    private static byte[] packed(int version, byte[] handle, long slotOffset, long seq) {
        return ByteBuffer.allocate(81).put((byte) version).put(handle).putLong(slotOffset).putLong(seq).array();
    }

    @Test
    void pythonsBytesDecodeAndEncodeBackIdentically() {
        // struct.pack("!B64sQQ", 1, bytes(range(64)), 8, 1): computed with CPython 3.11
        String python = "01" + HexFormat.of().formatHex(rangeBytes()) + "0000000000000008" + "0000000000000001";
        byte[] raw = HexFormat.of().parseHex(python);
        EventHandle.Timeline timeline = assertInstanceOf(EventHandle.Timeline.class, EventHandle.classify(raw));
        assertArrayEquals(rangeBytes(), timeline.memHandle());
        assertEquals(8, timeline.slotOffset());
        assertEquals(1, timeline.seq());
        assertArrayEquals(raw, timeline.encode());
        assertTrue(timeline.timelineFormat());
    }

    private static byte[] rangeBytes() {
        byte[] b = new byte[64];
        for (int i = 0; i < 64; i++) {
            b[i] = (byte) i;
        }
        return b;
    }

    @Test
    void theLargestValidSlotAndSequenceRoundTrip() {
        byte[] raw = packed(1, memHandle(), 32760, Long.MAX_VALUE);
        EventHandle.Timeline timeline = assertInstanceOf(EventHandle.Timeline.class, EventHandle.classify(raw));
        assertEquals(32760, timeline.slotOffset());
        assertEquals(Long.MAX_VALUE, timeline.seq());
        assertArrayEquals(raw, timeline.encode());
    }

    @Test
    void aCompleteEventIsSlotZeroSequenceZero() {
        byte[] raw = EventHandle.Timeline.complete(memHandle()).encode();
        assertEquals(81, raw.length);
        assertArrayEquals(packed(1, memHandle(), 0, 0), raw);
    }

    @Test
    void sixtyFourBytesAreACudaEventAndEmptyIsNoEvent() {
        EventHandle.CudaEvent zero = assertInstanceOf(EventHandle.CudaEvent.class, EventHandle.classify(new byte[64]));
        assertTrue(zero.none());
        assertFalse(zero.timelineFormat());
        EventHandle.CudaEvent real = assertInstanceOf(EventHandle.CudaEvent.class, EventHandle.classify(memHandle()));
        assertFalse(real.none());
        assertInstanceOf(EventHandle.Empty.class, EventHandle.classify(new byte[0]));
    }

    @Test
    void aWrongVersionIsMalformedButRepliedInTheTimelineFormat() {
        for (int version : new int[] {0, 2, 255}) {
            EventHandle.Malformed bad = assertInstanceOf(EventHandle.Malformed.class, EventHandle.classify(packed(version, memHandle(), 8, 1)));
            assertTrue(bad.timelineFormat(), "81 bytes: the worker runs the timeline backend");
            assertTrue(bad.reason().contains("version " + version), bad.reason());
        }
    }

    @Test
    void slotOffsetsOutOfTheBufferOrUnalignedAreMalformed() {
        for (long offset : new long[] {32768, 4, 9, 32767, -8, Long.MIN_VALUE}) {
            EventHandle handle = EventHandle.classify(packed(1, memHandle(), offset, 1));
            assertInstanceOf(EventHandle.Malformed.class, handle, "slot offset " + offset);
        }
    }

    @Test
    void aSequenceOfTwoToTheSixtyThreeOrMoreIsMalformed() {
        // the GPU's GEQ wait compares cyclically: such a value could pass at once or never
        assertInstanceOf(EventHandle.Malformed.class, EventHandle.classify(packed(1, memHandle(), 8, Long.MIN_VALUE)));
        assertInstanceOf(EventHandle.Malformed.class, EventHandle.classify(packed(1, memHandle(), 8, -1)));
    }

    @Test
    void otherLengthsAreMalformedInTheCudaEventFormat() {
        for (int length : new int[] {1, 63, 65, 66, 80}) {
            EventHandle.Malformed bad = assertInstanceOf(EventHandle.Malformed.class, EventHandle.classify(new byte[length]));
            assertFalse(bad.timelineFormat(), "a " + length + "-byte handle gets the 64-byte format");
            assertEquals(length, bad.length());
        }
    }

    @Test
    void theRecordRefusesWhatTheWireWouldRefuse() {
        assertThrows(IllegalArgumentException.class, () -> new EventHandle.Timeline(new byte[63], 0, 0));
        assertThrows(IllegalArgumentException.class, () -> new EventHandle.Timeline(memHandle(), 32768, 0));
        assertThrows(IllegalArgumentException.class, () -> new EventHandle.Timeline(memHandle(), 8, -1));
    }

    @Test
    void theWireLimitAdmitsBothFormats() {
        assertEquals(81, WireField.EVENT_IPC_HANDLE.max());
    }
}
