package io.lmcache.server.protocol;

import io.lmcache.server.protocol.ProtocolException.Reason;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Locale;
import org.msgpack.core.ExtensionTypeHeader;
import org.msgpack.core.MessageFormat;
import org.msgpack.core.MessageIntegerOverflowException;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessagePackException;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.core.buffer.ArrayBufferInput;
import org.msgpack.value.ValueType;

/**
 * Reads one msgpack frame with the checks a server facing untrusted input needs: every declared
 * length (string, binary, array, map, extension) must fit in the bytes that are left, so a frame
 * that declares a 100 MB string costs nothing; every string, binary, array, map and extension is
 * read as a {@link WireField} and refused past that field's limit before anything is allocated for
 * it; every type is checked; the frame must be consumed exactly. Not thread-safe; one instance per decoding thread, reused across frames.
 */
public final class MsgpackReader {
    /** Strings up to this size are remembered; field names, model names and salts repeat in every request. */
    private static final int CACHED_STRING_MAX_BYTES = 64;
    private static final int STRING_CACHE_SLOTS = 128; // a power of two

    private final ArrayBufferInput input = new ArrayBufferInput(new byte[0]);
    private final MessageUnpacker unpacker = MessagePack.DEFAULT_UNPACKER_CONFIG.newUnpacker(input);
    private byte[] frame = new byte[0];
    private int frameLength;
    /** A direct-mapped cache of short strings read before: their UTF-8 bytes and the decoded value. */
    private final byte[][] cachedUtf8 = new byte[STRING_CACHE_SLOTS][];
    private final String[] cachedStrings = new String[STRING_CACHE_SLOTS];
    /** The {@link WireField}s read, by ordinal (the generated limits test checks each op reads only its own). */
    private long fieldsRead;

    /** Starts reading {@code frame}. */
    public MsgpackReader reset(byte[] frame) {
        input.reset(frame);
        try {
            unpacker.reset(input);
        } catch (IOException e) {
            throw new IllegalStateException("resetting an in-memory unpacker cannot fail", e);
        }
        this.frame = frame;
        frameLength = frame.length;
        return this;
    }

    public long remaining() {
        return frameLength - unpacker.getTotalReadBytes();
    }

    /** Fails when bytes are left after the value(s) read so far. */
    public void expectEnd(String what) throws ProtocolException {
        if (remaining() != 0) {
            throw new ProtocolException(Reason.MALFORMED_MSGPACK, what + ": " + remaining() + " trailing byte(s) after the value");
        }
    }

    public ValueType nextType(String what) throws ProtocolException {
        try {
            if (!unpacker.hasNext()) {
                throw new ProtocolException(Reason.MALFORMED_MSGPACK, what + ": frame ends before the value");
            }
            MessageFormat format = unpacker.getNextFormat();
            if (format == MessageFormat.NEVER_USED) {
                throw new ProtocolException(Reason.MALFORMED_MSGPACK, what + ": byte 0xc1 is not valid msgpack");
            }
            return format.getValueType();
        } catch (IOException | MessagePackException e) {
            throw malformed(what, e);
        }
    }

    /** Consumes a nil and returns true, or returns false and consumes nothing. */
    public boolean tryReadNil(String what) throws ProtocolException {
        if (nextType(what) != ValueType.NIL) {
            return false;
        }
        try {
            unpacker.unpackNil();
            return true;
        } catch (IOException | MessagePackException e) {
            throw malformed(what, e);
        }
    }

    public long readLong(String what) throws ProtocolException {
        expect(what, ValueType.INTEGER);
        try {
            return unpacker.unpackLong();
        } catch (MessageIntegerOverflowException e) {
            throw new ProtocolException(Reason.BAD_VALUE, what + ": integer does not fit in 63 bits");
        } catch (IOException | MessagePackException e) {
            throw malformed(what, e);
        }
    }

    public int readInt(String what) throws ProtocolException {
        long value = readLong(what);
        if (value < Integer.MIN_VALUE || value > Integer.MAX_VALUE) {
            throw new ProtocolException(Reason.BAD_VALUE, what + ": " + value + " does not fit in 32 bits");
        }
        return (int) value;
    }

    public double readDouble(String what) throws ProtocolException {
        ValueType type = nextType(what);
        try {
            if (type == ValueType.INTEGER) {
                return unpacker.unpackLong();
            }
            expect(what, ValueType.FLOAT);
            return unpacker.unpackDouble();
        } catch (IOException | MessagePackException e) {
            throw malformed(what, e);
        }
    }

    public boolean readBool(String what) throws ProtocolException {
        expect(what, ValueType.BOOLEAN);
        try {
            return unpacker.unpackBoolean();
        } catch (IOException | MessagePackException e) {
            throw malformed(what, e);
        }
    }

    /**
     * A string; a short one this reader has read before is returned without decoding or allocating
     * (the decoder's hot path reads ten field names and a model name per LOOKUP).
     */
    public String readString(WireField field) throws ProtocolException {
        String what = field.wireName();
        expect(what, ValueType.STRING);
        try {
            int length = unpacker.unpackRawStringHeader();
            checkLength(what, length);
            checkLimit(field, length);
            if (length > CACHED_STRING_MAX_BYTES) {
                return new String(unpacker.readPayload(length), StandardCharsets.UTF_8);
            }
            int at = position();
            int slot = stringSlot(frame, at, length);
            byte[] cached = cachedUtf8[slot];
            String value;
            if (cached != null && Arrays.equals(cached, 0, cached.length, frame, at, at + length)) {
                value = cachedStrings[slot];
            } else {
                byte[] utf8 = Arrays.copyOfRange(frame, at, at + length);
                value = new String(utf8, StandardCharsets.UTF_8);
                cachedUtf8[slot] = utf8;
                cachedStrings[slot] = value;
            }
            skipBytes(length);
            return value;
        } catch (IOException | MessagePackException e) {
            throw malformed(what, e);
        }
    }

    private static int stringSlot(byte[] bytes, int at, int length) {
        int hash = length;
        if (length > 0) {
            hash = hash * 31 + bytes[at];
            hash = hash * 31 + bytes[at + length / 2];
            hash = hash * 31 + bytes[at + length - 1];
        }
        return (hash ^ (hash >>> 7)) & (STRING_CACHE_SLOTS - 1);
    }

    /** Where the unpacker is in the frame (the input holds exactly the frame, from offset 0). */
    private int position() {
        return (int) unpacker.getTotalReadBytes();
    }

    /** Moves the unpacker past {@code length} bytes already read from the frame directly (a view, no copy). */
    private void skipBytes(int length) throws IOException {
        if (length > 0) {
            unpacker.readPayloadAsReference(length);
        }
    }

    public byte[] readBinary(WireField field) throws ProtocolException {
        String what = field.wireName();
        expect(what, ValueType.BINARY);
        try {
            int length = unpacker.unpackBinaryHeader();
            checkLength(what, length);
            checkLimit(field, length);
            return unpacker.readPayload(length);
        } catch (IOException | MessagePackException e) {
            throw malformed(what, e);
        }
    }

    /** An array header whose element count can be present in the bytes left (each element takes ≥ 1 byte). */
    public int readArrayHeader(WireField field) throws ProtocolException {
        String what = field.wireName();
        expect(what, ValueType.ARRAY);
        try {
            int count = unpacker.unpackArrayHeader();
            checkLength(what, count);
            checkLimit(field, count);
            return count;
        } catch (IOException | MessagePackException e) {
            throw malformed(what, e);
        }
    }

    /** A map header; each entry takes ≥ 2 bytes. */
    public int readMapHeader(WireField field) throws ProtocolException {
        String what = field.wireName();
        expect(what, ValueType.MAP);
        try {
            int count = unpacker.unpackMapHeader();
            checkLength(what, 2L * count);
            checkLimit(field, count);
            return count;
        } catch (IOException | MessagePackException e) {
            throw malformed(what, e);
        }
    }

    /** An extension header; the payload must follow within the frame. */
    public ExtensionTypeHeader readExtensionHeader(WireField field) throws ProtocolException {
        String what = field.wireName();
        expect(what, ValueType.EXTENSION);
        try {
            ExtensionTypeHeader header = unpacker.unpackExtensionTypeHeader();
            checkLength(what, header.getLength());
            checkLimit(field, header.getLength());
            return header;
        } catch (IOException | MessagePackException e) {
            throw malformed(what, e);
        }
    }

    public byte[] readPayload(String what, int length) throws ProtocolException {
        checkLength(what, length);
        try {
            return unpacker.readPayload(length);
        } catch (IOException | MessagePackException e) {
            throw malformed(what, e);
        }
    }

    /**
     * An array of 32-bit integers. Token ids come in arrays of thousands, so the common encodings
     * (fixint, int8/16/32, uint8/16/32 that fit) are read straight from the frame, eight bytes at a
     * time and without a branch on the encoding (token ids mix uint16 and uint32 at random, which a
     * switch would mispredict about every other element); at the first element that is anything else
     * (a 64-bit encoding, an overflow, a wrong type) and for the last few bytes of the frame, the
     * rest goes through {@link #readInt}, which accepts or rejects it exactly as before.
     */
    public int[] readIntArray(WireField field) throws ProtocolException {
        String what = field.wireName();
        int count = readArrayHeader(field);
        int[] values = new int[count];
        readInts(what, values, 0, null, position());
        return values;
    }

    /**
     * As {@link #readIntArray(String)}, for arrays that repeat across requests (a key's token ids): an array whose bytes
     * {@code memo} remembers whole is that remembered array (shared and read-only, {@link IntArrayMemo}); otherwise the leading
     * elements whose bytes a recent array shares are copied from it, the rest decoded, and the array remembered.
     */
    public int[] readIntArray(WireField field, IntArrayMemo memo) throws ProtocolException {
        String what = field.wireName();
        int count = readArrayHeader(field);
        if (!IntArrayMemo.applies(count)) {
            int[] values = new int[count];
            readInts(what, values, 0, null, position());
            return values;
        }
        int start = position();
        IntArrayMemo.Whole whole = memo.whole(frame, start, frameLength, count);
        if (whole != null) {
            skip(what, whole.bytes());
            return whole.values();
        }
        int[] values = new int[count];
        int[] offsets = new int[count / IntArrayMemo.STRIDE + 1];
        IntArrayMemo.Reused reused = memo.reuse(frame, start, frameLength, count, values, offsets);
        skip(what, reused.bytes());
        readInts(what, values, reused.elements(), offsets, start);
        if (reused.elements() < count) {
            memo.remember(frame, start, position(), values, offsets);
        }
        return values;
    }

    private void skip(String what, int bytes) throws ProtocolException {
        try {
            skipBytes(bytes);
        } catch (IOException e) {
            throw malformed(what, e);
        }
    }

    /**
     * Decodes elements {@code from..values.length-1} from the current position; with {@code offsets}, also where each
     * {@link IntArrayMemo#STRIDE}-th element starts (relative to the array's first byte at {@code arrayStart}).
     */
    private void readInts(String what, int[] values, int from, int[] offsets, int arrayStart) throws ProtocolException {
        int count = values.length;
        byte[] bytes = frame;
        int start = position();
        int at = start;
        int i = from;
        int lastWideRead = frameLength - Long.BYTES;
        while (i < count && at <= lastWideRead) {
            if (offsets != null && (i & (IntArrayMemo.STRIDE - 1)) == 0) {
                offsets[i / IntArrayMemo.STRIDE] = at - arrayStart;
            }
            int head = bytes[at] & 0xff;
            int size = INT_SIZE[head];
            long word = (long) BIG_ENDIAN_LONG.get(bytes, at);
            long value = ((word << INT_SHIFT_LEFT[head]) >> INT_SHIFT_RIGHT[head]) & INT_MASK[head];
            if (size == 0 || value > Integer.MAX_VALUE) {
                break; // not a 32-bit encoding, or a uint32 that does not fit: readInt decides
            }
            values[i++] = (int) value;
            at += size;
        }
        skip(what, at - start);
        for (; i < count; i++) {
            if (offsets != null && (i & (IntArrayMemo.STRIDE - 1)) == 0) {
                offsets[i / IntArrayMemo.STRIDE] = position() - arrayStart;
            }
            values[i] = readInt(what);
        }
        if (offsets != null && count % IntArrayMemo.STRIDE == 0) {
            offsets[count / IntArrayMemo.STRIDE] = position() - arrayStart;
        }
    }

    private static final VarHandle BIG_ENDIAN_LONG =
            MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.BIG_ENDIAN);
    /**
     * Per first byte of an integer: its encoded size (0: not read on the fast path) and how to cut
     * its value out of the eight bytes starting at that first byte: shift the payload to the top,
     * shift it down arithmetically (sign-extending), then mask unsigned encodings back to positive.
     */
    private static final int[] INT_SIZE = new int[256];
    private static final int[] INT_SHIFT_LEFT = new int[256];
    private static final int[] INT_SHIFT_RIGHT = new int[256];
    private static final long[] INT_MASK = new long[256];

    static {
        for (int head = 0; head < 256; head++) {
            if (head <= 0x7f || head >= 0xe0) { // positive and negative fixint: the first byte is the value
                intEncoding(head, 1, 0, 1, true);
            }
        }
        intEncoding(0xcc, 2, 8, 1, false);
        intEncoding(0xcd, 3, 8, 2, false);
        intEncoding(0xce, 5, 8, 4, false);
        intEncoding(0xd0, 2, 8, 1, true);
        intEncoding(0xd1, 3, 8, 2, true);
        intEncoding(0xd2, 5, 8, 4, true);
    }

    private static void intEncoding(int head, int size, int shiftLeft, int valueBytes, boolean signed) {
        INT_SIZE[head] = size;
        INT_SHIFT_LEFT[head] = shiftLeft;
        INT_SHIFT_RIGHT[head] = 64 - 8 * valueBytes;
        INT_MASK[head] = signed ? -1L : (1L << (8 * valueBytes)) - 1;
    }

    /** Skips one value of any type (bounded by the frame: a short frame fails, it never allocates). */
    public void skipValue(String what) throws ProtocolException {
        nextType(what);
        try {
            unpacker.skipValue();
        } catch (IOException | MessagePackException e) {
            throw malformed(what, e);
        }
    }

    private void expect(String what, ValueType expected) throws ProtocolException {
        ValueType actual = nextType(what);
        if (actual != expected) {
            throw new ProtocolException(Reason.WRONG_TYPE, what + ": expected " + name(expected) + ", got " + name(actual));
        }
    }

    /**
     * The limit of {@code field} ({@link WireField}), checked on the length a header declares, before anything is allocated
     * for the value (after the check that the frame holds that much: a length the frame cannot hold is {@code oversized}, a
     * real value past its field's limit {@code over_limit}); a length of 2^31 or more arrives negative. Notes the field as read.
     */
    void checkLimit(WireField field, int declared) throws ProtocolException {
        fieldsRead |= 1L << field.ordinal();
        if (declared < 0 || declared > field.max()) {
            throw new ProtocolException(field, Integer.toUnsignedLong(declared));
        }
    }

    /** The fields read since {@link #clearFieldsRead()}, one bit per {@link WireField#ordinal()}. */
    long fieldsRead() {
        return fieldsRead;
    }

    void clearFieldsRead() {
        fieldsRead = 0;
    }

    private void checkLength(String what, long declared) throws ProtocolException {
        if (declared < 0 || declared > remaining()) {
            throw new ProtocolException(Reason.OVERSIZED, what + ": declares " + Integer.toUnsignedString((int) declared)
                    + " byte(s)/element(s) but only " + remaining() + " byte(s) are left in the frame");
        }
    }

    private static String name(ValueType type) {
        return type.name().toLowerCase(Locale.ROOT);
    }

    private static ProtocolException malformed(String what, Exception e) {
        String detail = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
        return new ProtocolException(Reason.MALFORMED_MSGPACK, what + ": " + detail);
    }
}
