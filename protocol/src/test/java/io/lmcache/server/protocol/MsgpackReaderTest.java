package io.lmcache.server.protocol;

import static io.lmcache.server.protocol.RequestDecoderTest.pack;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;

/** The reader's two fast paths (integer arrays read from the frame, remembered short strings) against msgpack-core itself. */
class MsgpackReaderTest {
    /** Every integer encoding msgpack has, each element written by hand so that the wide ones appear too. */
    private static final int ENCODINGS = 12;

    @Test
    void integerArraysInEveryEncodingDecodeAsMsgpackCoreDecodesThem() throws Exception {
        Random random = new Random(20261130);
        MsgpackReader reader = new MsgpackReader();
        for (int round = 0; round < 2_000; round++) {
            int count = random.nextInt(40);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            arrayHeader(out, count);
            for (int i = 0; i < count; i++) {
                writeInt(out, random.nextInt(ENCODINGS), random);
            }
            // sometimes the array ends the frame (the fast path's last bytes), sometimes a value follows
            boolean trailer = random.nextBoolean();
            if (trailer) {
                packInto(out, p -> p.packString("after"));
            }
            byte[] frame = out.toByteArray();

            int[] expected = referenceIntArray(frame);
            assertArrayEquals(expected, reader.reset(frame).readIntArray(WireField.TOKEN_IDS), "round " + round);
            if (trailer) {
                assertEquals("after", reader.readString(WireField.FIELD_NAME), "the reader stands right after the array");
            }
            reader.expectEnd("frame");
        }
    }

    @Test
    void aUint32AboveIntMaxIsRejectedAsBeforeWhereverItIs() throws Exception {
        for (int position = 0; position < 12; position++) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            arrayHeader(out, 12);
            for (int i = 0; i < 12; i++) {
                if (i == position) {
                    out.write(new byte[] {(byte) 0xce, (byte) 0x80, 0, 0, 0});
                } else {
                    out.write(7);
                }
            }
            ProtocolException e = assertThrows(ProtocolException.class, () -> new MsgpackReader().reset(out.toByteArray()).readIntArray(WireField.TOKEN_IDS));
            assertEquals(ProtocolException.Reason.BAD_VALUE, e.reason());
            assertTrue(e.getMessage().contains("2147483648 does not fit in 32 bits"), e.getMessage());
        }
    }

    @Test
    void aCutFrameOrAWrongElementIsAProtocolErrorNeverAnIndexError() throws Exception {
        // header promises 3 elements, the last uint16 is cut after its first byte
        byte[] cut = {(byte) 0x93, 1, 2, (byte) 0xcd, 0x01};
        assertThrows(ProtocolException.class, () -> new MsgpackReader().reset(cut).readIntArray(WireField.TOKEN_IDS));
        byte[] cutHead = {(byte) 0x92, 1, (byte) 0xce};
        assertThrows(ProtocolException.class, () -> new MsgpackReader().reset(cutHead).readIntArray(WireField.TOKEN_IDS));
        // a long array whose last element is cut: the fast path stops short of the end and hands over
        ByteArrayOutputStream longCut = new ByteArrayOutputStream();
        arrayHeader(longCut, 20);
        for (int i = 0; i < 19; i++) {
            bytes(longCut, 0xce, 100_000 + i, 4);
        }
        longCut.write(new byte[] {(byte) 0xce, 0x01, 0x02});
        assertThrows(ProtocolException.class, () -> new MsgpackReader().reset(longCut.toByteArray()).readIntArray(WireField.TOKEN_IDS));

        ByteArrayOutputStream out = new ByteArrayOutputStream();
        arrayHeader(out, 12);
        for (int i = 0; i < 12; i++) {
            if (i == 5) {
                packInto(out, p -> p.packString("x"));
            } else {
                out.write(i);
            }
        }
        ProtocolException e = assertThrows(ProtocolException.class, () -> new MsgpackReader().reset(out.toByteArray()).readIntArray(WireField.TOKEN_IDS));
        assertEquals(ProtocolException.Reason.WRONG_TYPE, e.reason());
    }

    @Test
    void shortStringsAreRememberedAndNeverConfused() throws Exception {
        MsgpackReader reader = new MsgpackReader();
        byte[] modelFrame = pack(p -> p.packString("meta-llama/Llama-3.1-8B-Instruct"));
        String first = reader.reset(modelFrame).readString(WireField.MODEL_NAME);
        assertSame(first, reader.reset(modelFrame.clone()).readString(WireField.MODEL_NAME), "a repeated short string is not decoded again");

        // many distinct strings through the slots: every one comes back as itself, before and after others took its slot
        Random random = new Random(7);
        List<String> values = new ArrayList<>();
        Set<String> seen = new HashSet<>();
        while (values.size() < 1_000) {
            String value = randomString(random, random.nextInt(70));
            if (seen.add(value)) {
                values.add(value);
            }
        }
        for (int pass = 0; pass < 2; pass++) {
            for (String value : values) {
                assertEquals(value, reader.reset(pack(p -> p.packString(value))).readString(WireField.MODEL_NAME));
            }
        }
        // bytes that are not UTF-8 decode as Java decodes them, cached or not
        byte[] invalid = {(byte) 0xa3, (byte) 0xff, (byte) 0xfe, 0x41};
        String expected = new String(new byte[] {(byte) 0xff, (byte) 0xfe, 0x41}, StandardCharsets.UTF_8);
        assertEquals(expected, reader.reset(invalid).readString(WireField.MODEL_NAME));
        assertEquals(expected, reader.reset(invalid).readString(WireField.MODEL_NAME));
        assertEquals("", reader.reset(pack(p -> p.packString(""))).readString(WireField.MODEL_NAME));
    }

    private static String randomString(Random random, int length) {
        StringBuilder builder = new StringBuilder();
        for (int i = 0; i < length; i++) {
            builder.append(random.nextInt(10) == 0 ? (char) (0x400 + random.nextInt(200)) : (char) ('a' + random.nextInt(26)));
        }
        return builder.toString();
    }

    /** One integer in encoding {@code kind}, with a value that fits it. */
    private static void writeInt(ByteArrayOutputStream out, int kind, Random random) {
        switch (kind) {
            case 0 -> out.write(random.nextInt(128)); // positive fixint
            case 1 -> out.write(0xe0 | random.nextInt(32)); // negative fixint
            case 2 -> bytes(out, 0xcc, random.nextInt(256), 1); // uint8
            case 3 -> bytes(out, 0xcd, random.nextInt(65536), 2); // uint16
            case 4 -> bytes(out, 0xce, random.nextInt(Integer.MAX_VALUE), 4); // uint32 that fits an int
            case 5 -> bytes(out, 0xd0, random.nextInt(256) - 128, 1); // int8
            case 6 -> bytes(out, 0xd1, random.nextInt(65536) - 32768, 2); // int16
            case 7 -> bytes(out, 0xd2, random.nextInt(), 4); // int32
            case 8 -> bytes(out, 0xcf, random.nextInt(Integer.MAX_VALUE), 8); // uint64 holding a small value
            case 9 -> bytes(out, 0xd3, random.nextInt(), 8); // int64 holding an int
            case 10 -> out.write(0); // zero
            default -> bytes(out, 0xce, 150_000 + random.nextInt(100), 4); // vocabulary-sized token id
        }
    }

    private static void bytes(ByteArrayOutputStream out, int head, long value, int size) {
        out.write(head);
        for (int shift = (size - 1) * 8; shift >= 0; shift -= 8) {
            out.write((int) (value >>> shift) & 0xff);
        }
    }

    private static void arrayHeader(ByteArrayOutputStream out, int count) throws IOException {
        packInto(out, p -> p.packArrayHeader(count));
    }

    private static int[] referenceIntArray(byte[] frame) throws IOException {
        try (MessageUnpacker unpacker = MessagePack.newDefaultUnpacker(frame)) {
            int[] values = new int[unpacker.unpackArrayHeader()];
            for (int i = 0; i < values.length; i++) {
                values[i] = unpacker.unpackInt();
            }
            return values;
        }
    }

    private static void packInto(ByteArrayOutputStream out, RequestDecoderTest.Writer writer) throws IOException {
        out.write(pack(writer));
    }
}
