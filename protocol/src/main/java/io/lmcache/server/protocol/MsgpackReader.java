package io.lmcache.server.protocol;

import io.lmcache.server.protocol.ProtocolException.Reason;
import java.io.IOException;
import org.msgpack.core.ExtensionTypeHeader;
import org.msgpack.core.MessageFormat;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.core.buffer.ArrayBufferInput;
import org.msgpack.value.ValueType;

/**
 * Reads one msgpack frame with the checks a server facing untrusted input needs: every declared
 * length (string, binary, array, map, extension) must fit in the bytes that are left, so a frame
 * that declares a 100 MB string costs nothing; every type is checked; the frame must be consumed
 * exactly. Not thread-safe; one instance per decoding thread, reused across frames.
 */
public final class MsgpackReader {
    private final ArrayBufferInput input = new ArrayBufferInput(new byte[0]);
    private final MessageUnpacker unpacker = MessagePack.DEFAULT_UNPACKER_CONFIG.newUnpacker(input);
    private int frameLength;

    /** Starts reading {@code frame}. */
    public MsgpackReader reset(byte[] frame) {
        input.reset(frame);
        try {
            unpacker.reset(input);
        } catch (IOException e) {
            throw new IllegalStateException("resetting an in-memory unpacker cannot fail", e);
        }
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
        } catch (IOException | org.msgpack.core.MessagePackException e) {
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
        } catch (IOException | org.msgpack.core.MessagePackException e) {
            throw malformed(what, e);
        }
    }

    public long readLong(String what) throws ProtocolException {
        expect(what, ValueType.INTEGER);
        try {
            return unpacker.unpackLong();
        } catch (org.msgpack.core.MessageIntegerOverflowException e) {
            throw new ProtocolException(Reason.BAD_VALUE, what + ": integer does not fit in 63 bits");
        } catch (IOException | org.msgpack.core.MessagePackException e) {
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
        } catch (IOException | org.msgpack.core.MessagePackException e) {
            throw malformed(what, e);
        }
    }

    public boolean readBool(String what) throws ProtocolException {
        expect(what, ValueType.BOOLEAN);
        try {
            return unpacker.unpackBoolean();
        } catch (IOException | org.msgpack.core.MessagePackException e) {
            throw malformed(what, e);
        }
    }

    public String readString(String what) throws ProtocolException {
        expect(what, ValueType.STRING);
        try {
            int length = unpacker.unpackRawStringHeader();
            checkLength(what, length);
            byte[] utf8 = unpacker.readPayload(length);
            return new String(utf8, java.nio.charset.StandardCharsets.UTF_8);
        } catch (IOException | org.msgpack.core.MessagePackException e) {
            throw malformed(what, e);
        }
    }

    public byte[] readBinary(String what) throws ProtocolException {
        expect(what, ValueType.BINARY);
        try {
            int length = unpacker.unpackBinaryHeader();
            checkLength(what, length);
            return unpacker.readPayload(length);
        } catch (IOException | org.msgpack.core.MessagePackException e) {
            throw malformed(what, e);
        }
    }

    /** An array header whose element count can be present in the bytes left (each element takes ≥ 1 byte). */
    public int readArrayHeader(String what) throws ProtocolException {
        expect(what, ValueType.ARRAY);
        try {
            int count = unpacker.unpackArrayHeader();
            checkLength(what, count);
            return count;
        } catch (IOException | org.msgpack.core.MessagePackException e) {
            throw malformed(what, e);
        }
    }

    /** A map header; each entry takes ≥ 2 bytes. */
    public int readMapHeader(String what) throws ProtocolException {
        expect(what, ValueType.MAP);
        try {
            int count = unpacker.unpackMapHeader();
            checkLength(what, 2L * count);
            return count;
        } catch (IOException | org.msgpack.core.MessagePackException e) {
            throw malformed(what, e);
        }
    }

    /** An extension header; the payload must follow within the frame. */
    public ExtensionTypeHeader readExtensionHeader(String what) throws ProtocolException {
        expect(what, ValueType.EXTENSION);
        try {
            ExtensionTypeHeader header = unpacker.unpackExtensionTypeHeader();
            checkLength(what, header.getLength());
            return header;
        } catch (IOException | org.msgpack.core.MessagePackException e) {
            throw malformed(what, e);
        }
    }

    public byte[] readPayload(String what, int length) throws ProtocolException {
        checkLength(what, length);
        try {
            return unpacker.readPayload(length);
        } catch (IOException | org.msgpack.core.MessagePackException e) {
            throw malformed(what, e);
        }
    }

    public int[] readIntArray(String what) throws ProtocolException {
        int count = readArrayHeader(what);
        int[] values = new int[count];
        for (int i = 0; i < count; i++) {
            values[i] = readInt(what);
        }
        return values;
    }

    /** Skips one value of any type (bounded by the frame: a short frame fails, it never allocates). */
    public void skipValue(String what) throws ProtocolException {
        nextType(what);
        try {
            unpacker.skipValue();
        } catch (IOException | org.msgpack.core.MessagePackException e) {
            throw malformed(what, e);
        }
    }

    private void expect(String what, ValueType expected) throws ProtocolException {
        ValueType actual = nextType(what);
        if (actual != expected) {
            throw new ProtocolException(Reason.WRONG_TYPE, what + ": expected " + name(expected) + ", got " + name(actual));
        }
    }

    private void checkLength(String what, long declared) throws ProtocolException {
        if (declared < 0 || declared > remaining()) {
            throw new ProtocolException(Reason.OVERSIZED, what + ": declares " + Integer.toUnsignedString((int) declared)
                    + " byte(s)/element(s) but only " + remaining() + " byte(s) are left in the frame");
        }
    }

    private static String name(ValueType type) {
        return type.name().toLowerCase(java.util.Locale.ROOT);
    }

    private static ProtocolException malformed(String what, Exception e) {
        String detail = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
        return new ProtocolException(Reason.MALFORMED_MSGPACK, what + ": " + detail);
    }
}
