package io.lmcache.server.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.dataformat.cbor.CBORFactory;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The hand-written CBOR of {@link Sha256CborChain} against a second encoder, Jackson's, for the one
 * shape hashed here, over random tokens of every integer width. Jackson writes these shapes in
 * the shortest form when a definite array length is given (it promises no canonical form in
 * general, which is why it is not used in the chain itself). cbor2's own bytes are in
 * chains.json's derivation.
 */
class Sha256CborEncodingTest {
    private static final CBORFactory CBOR = new CBORFactory();

    private static byte[] jackson(byte[] prefix, int[] tokens) throws IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try (JsonGenerator g = CBOR.createGenerator(out)) {
            g.writeStartArray(null, 3);
            g.writeBinary(prefix);
            g.writeStartArray(null, tokens.length);
            for (int token : tokens) {
                g.writeNumber(token);
            }
            g.writeEndArray();
            g.writeNull();
            g.writeEndArray();
        }
        return out.toByteArray();
    }

    @Test
    void theChunkBytesEqualJacksonsForEveryIntegerWidth() throws Exception {
        Random random = new Random(27);
        int[] widths = {0, 23, 24, 255, 256, 65535, 65536, Integer.MAX_VALUE};
        TokenHashChain chain = TokenHashChain.sha256Cbor("0");
        for (int round = 0; round < 300; round++) {
            int[] tokens = new int[random.nextInt(1, 600)];
            for (int i = 0; i < tokens.length; i++) {
                int magnitude = (int) random.nextLong(widths[random.nextInt(widths.length)] + 1L);
                tokens[i] = random.nextBoolean() ? magnitude : -1 - magnitude;
            }
            tokens[0] = random.nextBoolean() ? Integer.MIN_VALUE : Integer.MAX_VALUE;
            byte[] prefix = new byte[32];
            random.nextBytes(prefix);
            byte[] expected = MessageDigest.getInstance("SHA-256").digest(jackson(prefix, tokens));
            byte[] out = new byte[32];
            chain.chunk(prefix, 0, tokens, 0, tokens.length, out, 0);
            assertArrayEquals(expected, out, "tokens " + Arrays.toString(Arrays.copyOf(tokens, 8)) + "...");
        }
    }

    @Test
    void headsAreTheShortest() {
        byte[] out = new byte[9];
        assertEquals("17", hex(out, Sha256CborChain.head(out, 0, 0, 23)));
        assertEquals("1818", hex(out, Sha256CborChain.head(out, 0, 0, 24)));
        assertEquals("18ff", hex(out, Sha256CborChain.head(out, 0, 0, 255)));
        assertEquals("190100", hex(out, Sha256CborChain.head(out, 0, 0, 256)));
        assertEquals("19ffff", hex(out, Sha256CborChain.head(out, 0, 0, 65535)));
        assertEquals("1a00010000", hex(out, Sha256CborChain.head(out, 0, 0, 65536)));
        assertEquals("1affffffff", hex(out, Sha256CborChain.head(out, 0, 0, 0xffffffffL)));
        assertEquals("1b0000000100000000", hex(out, Sha256CborChain.head(out, 0, 0, 1L << 32)));
        assertEquals("20", hex(out, Sha256CborChain.head(out, 0, 1, 0)), "-1");
        assertEquals("3a7fffffff", hex(out, Sha256CborChain.head(out, 0, 1, Integer.MAX_VALUE)), "Integer.MIN_VALUE");
        assertEquals("5820", hex(out, Sha256CborChain.head(out, 0, 2, 32)), "a 32-byte string");
        assertEquals("9a00010000", hex(out, Sha256CborChain.head(out, 0, 4, 65536)), "an array of 65536");
    }

    private static String hex(byte[] bytes, int length) {
        return HexFormat.of().formatHex(bytes, 0, length);
    }
}
