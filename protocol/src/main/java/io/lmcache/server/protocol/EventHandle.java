package io.lmcache.server.protocol;

import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * The event handle of a STORE/RETRIEVE request or reply, classified by its length and version byte: nothing on the wire
 * says which event backend the worker runs (LMCache's isolated IPC is not negotiated), so the server reads each handle for
 * what it is and answers in the same format (newest-clients.md §2.5).
 *
 * <ul>
 * <li>64 bytes: a {@code cudaIpcEventHandle_t} (the default backend; all zeros: no event);
 * <li>81 bytes with version 1: a timeline-semaphore event, Python {@code struct} {@code "!B64sQQ"} (big-endian: version,
 *     the exporter's 64-byte {@code cudaIpcMemHandle_t} of its semaphore buffer, slot offset in bytes, sequence), from
 *     {@code LMCache/LMCache:lmcache/v1/platform/devices/cuda/timeline_semaphore_event_ipc.py@bee9b57d}
 *     ({@code _EXPORT_STRUCT}, {@code import_event}'s checks);
 * <li>empty: the newest clients' "no device event";
 * <li>anything else: malformed (a reply and a counter, never a wait).
 * </ul>
 */
public sealed interface EventHandle permits EventHandle.CudaEvent, EventHandle.Timeline, EventHandle.Empty, EventHandle.Malformed {
    int CUDA_EVENT_BYTES = 64;
    int TIMELINE_BYTES = 81;
    /** The longest handle any backend sends: the wire limit of {@code event_ipc_handle}. */
    int MAX_BYTES = TIMELINE_BYTES;
    int TIMELINE_VERSION = 1;
    /** LMCache's {@code _SLOT_COUNT * _SLOT_BYTES}: 4096 slots of 8 bytes; slot 0 is the support probe's. */
    int SLOT_BYTES = 8;
    int SLOTS = 4096;
    int BUFFER_BYTES = SLOTS * SLOT_BYTES;
    int MEM_HANDLE_BYTES = 64;

    /** Whether the reply to this request carries an 81-byte timeline payload. */
    default boolean timelineFormat() {
        return false;
    }

    /** A 64-byte CUDA IPC event handle (all zeros: nothing to wait for). */
    record CudaEvent(byte[] handle) implements EventHandle {
        public boolean none() {
            for (byte b : handle) {
                if (b != 0) {
                    return false;
                }
            }
            return true;
        }
    }

    /**
     * A timeline-semaphore event: the exporter's buffer handle, the slot's byte offset in it, and the value the slot reaches
     * when the event completes ({@code seq} 0: never recorded, complete).
     */
    record Timeline(byte[] memHandle, long slotOffset, long seq) implements EventHandle {
        public Timeline {
            if (memHandle.length != MEM_HANDLE_BYTES) {
                throw new IllegalArgumentException("a cudaIpcMemHandle_t has 64 bytes, got " + memHandle.length);
            }
            if (slotOffset < 0 || slotOffset >= BUFFER_BYTES || slotOffset % SLOT_BYTES != 0) {
                throw new IllegalArgumentException("slot offset " + slotOffset + " is not an 8-byte-aligned offset below " + BUFFER_BYTES);
            }
            if (seq < 0) {
                throw new IllegalArgumentException("sequence " + Long.toUnsignedString(seq) + " is 2^63 or more");
            }
        }

        /** The complete event of a buffer: what a reply carries when there is nothing to wait for. */
        public static Timeline complete(byte[] memHandle) {
            return new Timeline(memHandle, 0, 0);
        }

        @Override
        public boolean timelineFormat() {
            return true;
        }

        /** The 81 bytes on the wire. */
        public byte[] encode() {
            ByteBuffer out = ByteBuffer.allocate(TIMELINE_BYTES); // big-endian, as "!" packs
            out.put((byte) TIMELINE_VERSION).put(memHandle).putLong(slotOffset).putLong(seq);
            return out.array();
        }

        @Override
        public boolean equals(Object other) {
            return other instanceof Timeline o && Arrays.equals(memHandle, o.memHandle) && slotOffset == o.slotOffset && seq == o.seq;
        }

        @Override
        public int hashCode() {
            return Arrays.hashCode(memHandle) * 31 + Long.hashCode(slotOffset * 31 + seq);
        }

        @Override
        public String toString() {
            return "Timeline[slotOffset=" + slotOffset + ", seq=" + seq + "]";
        }
    }

    /** No handle (the newest clients' {@code b""}): nothing to wait for; the reply uses the CUDA event format. */
    record Empty() implements EventHandle {}

    /**
     * A handle that is neither: the transfer is refused with a reply in the format its length suggests (81 bytes: the
     * timeline format, so a worker of that backend can read it).
     */
    record Malformed(int length, String reason) implements EventHandle {
        @Override
        public boolean timelineFormat() {
            return length == TIMELINE_BYTES;
        }
    }

    /** Classifies a request's handle; never throws. */
    static EventHandle classify(byte[] raw) {
        if (raw.length == 0) {
            return new Empty();
        }
        if (raw.length == CUDA_EVENT_BYTES) {
            return new CudaEvent(raw);
        }
        if (raw.length != TIMELINE_BYTES) {
            return new Malformed(raw.length, "an event handle has 64 bytes (CUDA event) or 81 (timeline semaphore), got " + raw.length);
        }
        int version = raw[0] & 0xff;
        if (version != TIMELINE_VERSION) {
            return new Malformed(raw.length, "timeline-semaphore event handle version " + version + ", only version 1 is known");
        }
        ByteBuffer in = ByteBuffer.wrap(raw);
        long slotOffset = in.getLong(1 + MEM_HANDLE_BYTES);
        long seq = in.getLong(1 + MEM_HANDLE_BYTES + 8);
        if (slotOffset < 0 || slotOffset >= BUFFER_BYTES || slotOffset % SLOT_BYTES != 0) {
            return new Malformed(raw.length, "timeline-semaphore slot offset " + Long.toUnsignedString(slotOffset)
                    + " is not an 8-byte-aligned offset below " + BUFFER_BYTES);
        }
        if (seq < 0) {
            // the GPU's GEQ compare is cyclic ((int64) (*addr - value) >= 0): a wait for 2^63 or more could pass at once or never
            return new Malformed(raw.length, "timeline-semaphore sequence " + Long.toUnsignedString(seq) + " is 2^63 or more");
        }
        return new Timeline(Arrays.copyOfRange(raw, 1, 1 + MEM_HANDLE_BYTES), slotOffset, seq);
    }
}
