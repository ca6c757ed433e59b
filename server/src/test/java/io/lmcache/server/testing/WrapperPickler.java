package io.lmcache.server.testing;

import java.io.ByteArrayOutputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;

/**
 * Writes a {@code CpuShmTensorWrapper} pickle byte for byte as CPython's pickler does for
 * LMCache's class (protocol 4: one FRAME, MEMOIZE after every string, global, tuple and object;
 * BININT1/BININT2/BININT/LONG1 by size; TUPLE1..3 for short tuples). {@code WrapperPicklerTest}
 * proves the bytes equal the golden capture, so Java tests can register real-looking CPU workers
 * without Python.
 */
public final class WrapperPickler {
    private WrapperPickler() {}

    public static byte[] cpuShm(String shmName, long nbytes, String dtype, long[] shape, long[] stride, long storageOffset) {
        Body body = new Body();
        body.string("lmcache.v1.platform.cpu.shm");
        body.string("CpuShmTensorWrapper");
        body.op(0x93).memoize(); // STACK_GLOBAL
        body.op(0x29); // EMPTY_TUPLE
        body.op(0x81).memoize(); // NEWOBJ
        body.op(0x7d).memoize(); // EMPTY_DICT
        body.op(0x28); // MARK
        body.string("shm_name").string(shmName);
        body.string("nbytes").integer(nbytes);
        body.string("handle").op(0x4e); // NONE
        body.string("dtype").string("torch").string(dtype).op(0x93).memoize();
        body.string("shape").tuple(shape);
        body.string("stride").tuple(stride);
        body.string("storage_offset").integer(storageOffset);
        body.string("device_uuid").string("cpu");
        body.op(0x75); // SETITEMS
        body.op(0x62); // BUILD
        body.op(0x2e); // STOP
        byte[] frame = body.out.toByteArray();
        ByteArrayOutputStream pickle = new ByteArrayOutputStream();
        pickle.write(0x80);
        pickle.write(4);
        pickle.write(0x95); // FRAME, 8-byte little-endian length
        for (int i = 0; i < 8; i++) {
            pickle.write((int) ((long) frame.length >>> (8 * i)) & 0xff);
        }
        pickle.writeBytes(frame);
        return pickle.toByteArray();
    }

    private static final class Body {
        final ByteArrayOutputStream out = new ByteArrayOutputStream();

        Body op(int code) {
            out.write(code);
            return this;
        }

        Body memoize() {
            return op(0x94);
        }

        Body string(String value) {
            byte[] utf8 = value.getBytes(StandardCharsets.UTF_8);
            if (utf8.length < 256) {
                out.write(0x8c);
                out.write(utf8.length);
            } else {
                out.write(0x58);
                writeLe(utf8.length, 4);
            }
            out.writeBytes(utf8);
            return memoize();
        }

        Body integer(long value) {
            if (value >= 0 && value < 256) {
                out.write(0x4b);
                out.write((int) value);
            } else if (value >= 0 && value < 65536) {
                out.write(0x4d);
                writeLe(value, 2);
            } else if (value >= Integer.MIN_VALUE && value <= Integer.MAX_VALUE) {
                out.write(0x4a);
                writeLe(value, 4);
            } else {
                // LONG1: minimal two's-complement little-endian
                BigInteger big = BigInteger.valueOf(value);
                byte[] be = big.toByteArray();
                out.write(0x8a);
                out.write(be.length);
                for (int i = be.length - 1; i >= 0; i--) {
                    out.write(be[i]);
                }
            }
            return this;
        }

        Body tuple(long[] values) {
            if (values.length == 0) {
                return op(0x29);
            }
            if (values.length > 3) {
                out.write(0x28);
            }
            for (long value : values) {
                integer(value);
            }
            out.write(switch (values.length) {
                case 1 -> 0x85;
                case 2 -> 0x86;
                case 3 -> 0x87;
                default -> 0x74;
            });
            return memoize();
        }

        void writeLe(long value, int bytes) {
            for (int i = 0; i < bytes; i++) {
                out.write((int) (value >>> (8 * i)) & 0xff);
            }
        }
    }
}
