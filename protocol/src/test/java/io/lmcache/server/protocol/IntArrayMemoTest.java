package io.lmcache.server.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/** The memo gives exactly the values decoding gives, and only for the leading elements whose bytes agree. */
class IntArrayMemoTest {
    private final IntArrayMemo memo = new IntArrayMemo();

    private static int[] tokens(long seed, int count) {
        Random random = new Random(seed);
        int[] tokens = new int[count];
        Arrays.setAll(tokens, i -> random.nextInt(151_936)); // fixint, uint8, uint16 and uint32 encodings mixed
        return tokens;
    }

    /** The array, then a string after it (as a key's next field). */
    private static byte[] frame(int[] values) throws IOException {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            packer.packArrayHeader(values.length);
            for (int v : values) {
                packer.packInt(v);
            }
            packer.packString("start");
            return packer.toByteArray();
        }
    }

    private int[] viaMemo(byte[] frame) throws ProtocolException {
        MsgpackReader reader = new MsgpackReader().reset(frame);
        int[] values = reader.readIntArray(WireField.TOKEN_IDS, memo);
        assertEquals("start", reader.readString(WireField.FIELD_NAME), "the reader ends right after the array");
        return values;
    }

    @Test
    void theSameArrayAgainIsTheFirstRequestsArrayShared() throws Exception {
        int[] prompt = tokens(1, 4_000);
        int[] first = viaMemo(frame(prompt));
        assertArrayEquals(prompt, first);
        assertEquals(0, memo.reusedValues());
        assertTrue(memo.shares(first), "a whole array is remembered as the request got it");
        int[] again = viaMemo(frame(prompt));
        assertSame(first, again, "the same bytes again: the same read-only instance, no allocation and no copy");
        assertEquals(4_000, memo.reusedValues());
        // a longer array of the same prefix is its own array, copied in part and then remembered in the slot's place
        int[] longer = Arrays.copyOf(prompt, 4_100);
        int[] third = viaMemo(frame(longer));
        assertNotSame(first, third);
        assertArrayEquals(longer, third);
        assertFalse(memo.shares(first), "replaced in its slot: no longer handed out");
        assertTrue(memo.shares(third));
        assertFalse(memo.shares(prompt.clone()), "an equal array that is not the memo's own");
    }

    @Test
    void aLongerArrayReusesThePromptAndAShorterOrDifferingOneItsWholeStrides() throws Exception {
        int[] prompt = tokens(2, 1_000);
        viaMemo(frame(prompt));
        // the prompt and what the model generated after it: another count, so another header, the same leading bytes
        int[] longer = Arrays.copyOf(prompt, 1_500);
        System.arraycopy(tokens(3, 500), 0, longer, 1_000, 500);
        assertArrayEquals(longer, viaMemo(frame(longer)));
        assertEquals(1_000, memo.reusedValues());
        // a token that differs at 1 200: the 18 whole strides before it (1 152 values)
        int[] differs = longer.clone();
        differs[1_200] = differs[1_200] == 7 ? 8 : 7;
        assertArrayEquals(differs, viaMemo(frame(differs)));
        assertEquals(1_000 + 1_152, memo.reusedValues());
        // a prefix of it: whole strides only (640 of 700)
        int[] shorter = Arrays.copyOf(differs, 700);
        assertArrayEquals(shorter, viaMemo(frame(shorter)));
        assertEquals(1_000 + 1_152 + 640, memo.reusedValues());
    }

    /** 320 elements (five strides), element 100 as a uint64 of its low byte (read by readInt), the last as {@code last}. */
    private static byte[] oddFrame(int[] values, byte[] last) throws IOException {
        try (MessageBufferPacker packer = MessagePack.newDefaultBufferPacker()) {
            packer.packArrayHeader(values.length);
            for (int i = 0; i < values.length - 1; i++) {
                if (i == 100) {
                    packer.addPayload(new byte[] {(byte) 0xcf, 0, 0, 0, 0, 0, 0, 0, (byte) values[i]});
                } else {
                    packer.packInt(values[i]);
                }
            }
            packer.addPayload(last);
            packer.packString("start");
            return packer.toByteArray();
        }
    }

    @Test
    void slowPathEncodingsAndBoundariesDecodeAsWithoutTheMemo() throws Exception {
        int[] values = tokens(4, 320);
        values[319] = 5;
        byte[] odd = oddFrame(values, new byte[] {5});
        values[100] &= 0xff;
        assertArrayEquals(values, viaMemo(odd));
        assertArrayEquals(values, viaMemo(odd));
        assertEquals(320, memo.reusedValues());
        // a value past 32 bits is still refused, also after the bytes before it matched a remembered array
        byte[] refused = oddFrame(values, new byte[] {(byte) 0xce, (byte) 0xff, (byte) 0xff, (byte) 0xff, (byte) 0xff});
        assertThrows(ProtocolException.class, () -> new MsgpackReader().reset(refused).readIntArray(WireField.TOKEN_IDS, memo));
        assertEquals(320 + 256, memo.reusedValues(), "the four whole strides before the last element were copied");
    }

    @Test
    void shortArraysAreNotMemoizedAndLongOnesKeepTheirFirst64KiValues() throws Exception {
        int[] small = tokens(5, 200);
        viaMemo(frame(small));
        viaMemo(frame(small));
        assertEquals(0, memo.reusedValues(), "under 256 values: decoded each time");
        int[] large = tokens(6, 100_000);
        assertArrayEquals(large, viaMemo(frame(large)));
        assertArrayEquals(large, viaMemo(frame(large)));
        assertEquals(IntArrayMemo.MAX_VALUES, memo.reusedValues());
    }
}
