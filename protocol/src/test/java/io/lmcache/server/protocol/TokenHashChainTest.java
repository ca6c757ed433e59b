package io.lmcache.server.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.bouncycastle.crypto.digests.Blake3Digest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * LMCache's chains against values derived without this code: BLAKE3's published vectors (for the
 * digest BouncyCastle computes) and chains worked from LMCache's and vLLM's definitions by
 * {@code hashing/generate_chains.py} (b3sum, hand-assembled CBOR checked against cbor2, hashlib).
 */
class TokenHashChainTest {
    private static final HexFormat HEX = HexFormat.of();

    record Chain(String name, String algorithm, String seed, int chunkSize, int[] tokens, String root, List<String> hashes) {
        TokenHashChain chain() {
            return algorithm.equals("blake3") ? TokenHashChain.blake3() : TokenHashChain.sha256Cbor(seed);
        }

        @Override
        public String toString() {
            return name;
        }
    }

    static Stream<Chain> chains() throws IOException {
        JsonNode cases;
        try (InputStream in = resource("chains.json")) {
            cases = new ObjectMapper().readTree(in).get("cases");
        }
        List<Chain> out = new ArrayList<>();
        for (JsonNode c : cases) {
            List<String> hashes = new ArrayList<>();
            c.get("hashes").forEach(h -> hashes.add(h.asText()));
            out.add(new Chain(c.get("name").asText(), c.get("algorithm").asText(), c.has("seed") ? c.get("seed").asText() : null,
                    c.get("chunk_size").asInt(), tokens(c), c.get("root").asText(), hashes));
        }
        return out.stream();
    }

    private static int[] tokens(JsonNode c) {
        if (c.has("tokens")) {
            int[] tokens = new int[c.get("tokens").size()];
            for (int i = 0; i < tokens.length; i++) {
                tokens[i] = c.get("tokens").get(i).intValue();
            }
            return tokens;
        }
        JsonNode f = c.get("tokens_formula");
        long mul = f.get("mul").asLong();
        long add = f.get("add").asLong();
        long mod = f.get("mod").asLong();
        int[] tokens = new int[f.get("count").asInt()];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = (int) ((i * mul + add) % mod);
        }
        return tokens;
    }

    private static InputStream resource(String name) {
        InputStream in = TokenHashChainTest.class.getResourceAsStream("/hashing/" + name);
        if (in == null) {
            throw new IllegalStateException("test resource hashing/" + name + " is missing");
        }
        return in;
    }

    @Test
    void ourBlake3GivesThePublishedVectorsAndB3sums() throws IOException {
        Blake3 blake3 = new Blake3();
        for (String file : List.of("blake3-published-vectors.txt", "blake3-b3sum-vectors.txt")) {
            int checked = 0;
            try (BufferedReader in = new BufferedReader(new InputStreamReader(resource(file), StandardCharsets.UTF_8))) {
                for (String line = in.readLine(); line != null; line = in.readLine()) {
                    if (line.startsWith("#") || line.isBlank()) {
                        continue;
                    }
                    String[] fields = line.split(" ");
                    byte[] input = pattern(Integer.parseInt(fields[0]));
                    byte[] out = new byte[40];
                    blake3.hash(input, 0, input.length, out, 4); // at an offset, into a larger array
                    assertEquals(fields[1], HEX.formatHex(out, 4, 36), file + ": input_len " + fields[0]);
                    checked++;
                }
            }
            assertEquals(file.contains("published") ? 22 : 9, checked, "every case of " + file);
        }
    }

    @Test
    void ourBlake3EqualsBouncyCastlesForEveryLengthToFiveChunks() {
        Blake3 blake3 = new Blake3();
        byte[] input = pattern(5 * 1024 + 7);
        byte[] padded = new byte[input.length + 3];
        System.arraycopy(input, 0, padded, 3, input.length);
        for (int length = 0; length <= input.length; length++) {
            Blake3Digest digest = new Blake3Digest(256);
            digest.update(input, 0, length);
            byte[] expected = new byte[32];
            digest.doFinal(expected, 0);
            byte[] out = new byte[32];
            blake3.hash(padded, 3, length, out, 0);
            assertArrayEquals(expected, out, "length " + length);
        }
    }

    @Test
    void prefixedTokensEqualBouncyCastleOverTheSameBytesForEveryTokenCountToFiveChunks() {
        // the token path builds message words from the int[] without a byte buffer: every block and chunk boundary
        // (32 + 4 n bytes, n to 1 300: up to six BLAKE3 chunks) against BouncyCastle over the bytes LMCache hashes
        Blake3 blake3 = new Blake3();
        int[] tokens = new Random(3).ints(1_305, Integer.MIN_VALUE, Integer.MAX_VALUE).toArray();
        byte[] prefix = new byte[32 + 5];
        new Random(4).nextBytes(prefix);
        for (int count = 0; count <= 1_300; count++) {
            int from = count % 5;
            byte[] bytes = new byte[32 + 4 * count];
            System.arraycopy(prefix, 5, bytes, 0, 32);
            for (int t = 0; t < count; t++) {
                int token = tokens[from + t];
                for (int b = 0; b < 4; b++) {
                    bytes[32 + 4 * t + b] = (byte) (token >>> (24 - 8 * b));
                }
            }
            Blake3Digest digest = new Blake3Digest(256);
            digest.update(bytes, 0, bytes.length);
            byte[] expected = new byte[32];
            digest.doFinal(expected, 0);
            byte[] out = new byte[32 + 2];
            blake3.hashPrefixedTokens(prefix, 5, tokens, from, from + count, out, 2);
            assertArrayEquals(expected, Arrays.copyOfRange(out, 2, 34), count + " tokens");
            byte[] viaBytes = new byte[32];
            blake3.hash(bytes, 0, bytes.length, viaBytes, 0);
            assertArrayEquals(expected, viaBytes, count + " tokens as bytes");
        }
    }

    private static byte[] pattern(int length) {
        byte[] input = new byte[length];
        for (int i = 0; i < length; i++) {
            input[i] = (byte) (i % 251);
        }
        return input;
    }

    @Test
    void bouncyCastlesBlake3GivesThePublishedVectors() throws IOException {
        int checked = 0;
        try (BufferedReader in = new BufferedReader(new InputStreamReader(resource("blake3-published-vectors.txt"), StandardCharsets.UTF_8))) {
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                if (line.startsWith("#") || line.isBlank()) {
                    continue;
                }
                String[] fields = line.split(" ");
                byte[] input = new byte[Integer.parseInt(fields[0])];
                for (int i = 0; i < input.length; i++) {
                    input[i] = (byte) (i % 251);
                }
                Blake3Digest digest = new Blake3Digest(256);
                digest.update(input, 0, input.length);
                byte[] out = new byte[32];
                digest.doFinal(out, 0);
                assertEquals(fields[1], HEX.formatHex(out), "input_len " + fields[0]);
                checked++;
            }
        }
        assertEquals(22, checked, "every published case of the file");
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("chains")
    void rootAndChainEqualTheDefinitions(Chain c) {
        TokenHashChain chain = c.chain();
        assertEquals(c.root(), HEX.formatHex(chain.root()));
        int chunks = c.tokens().length / c.chunkSize();
        assertEquals(c.hashes().size(), chunks, "complete chunks only");
        byte[] hashes = new byte[32 * chunks];
        chain.hashChunks(c.tokens(), c.chunkSize(), 0, chunks, hashes);
        for (int i = 0; i < chunks; i++) {
            assertEquals(c.hashes().get(i), HEX.formatHex(hashes, 32 * i, 32 * i + 32), "chunk " + i);
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("chains")
    void oneChunkAtATimeInPlaceGivesTheSameChain(Chain c) {
        TokenHashChain chain = c.chain();
        byte[] prefix = chain.root();
        for (int i = 0; i < c.hashes().size(); i++) {
            chain.chunk(prefix, 0, c.tokens(), i * c.chunkSize(), (i + 1) * c.chunkSize(), prefix, 0); // output over its own input
            assertEquals(c.hashes().get(i), HEX.formatHex(prefix), "chunk " + i);
        }
    }

    @Test
    void theBlake3RootIsBlake3OfTwelveZeroBytes() {
        Blake3Digest digest = new Blake3Digest(256);
        digest.update(new byte[12], 0, 12);
        byte[] expected = new byte[32];
        digest.doFinal(expected, 0);
        assertArrayEquals(expected, TokenHashChain.blake3().root());
        assertEquals("7e3eff9ef7613a50340eb12677ee03b83ac759fcba9bb32705f07248d56d473b", HEX.formatHex(expected));
    }

    @Test
    void theBlake3RootIsSharedButNeverHandedOut() {
        // the root is hashed once per JVM (issue 52) and lent to every chain: a caller scribbling on the root it was given, or a
        // chain hashing its first chunk, must reach no other chain
        byte[] expected = TokenHashChain.blake3().root();
        TokenHashChain first = TokenHashChain.blake3();
        byte[] given = first.root();
        Arrays.fill(given, (byte) 0x55);
        byte[] out = new byte[32];
        first.chunk(first.root(), 0, new int[] {1, 2, 3}, 0, 3, out, 0);
        assertArrayEquals(expected, TokenHashChain.blake3().root());
        assertArrayEquals(expected, first.root());
        byte[] again = new byte[32];
        TokenHashChain.blake3().chunk(expected, 0, new int[] {1, 2, 3}, 0, 3, again, 0);
        assertArrayEquals(out, again, "the first chunk hashes the same from any chain");
    }

    @Test
    void theSha256CborRootIsTheSeedAsACborTextString() throws Exception {
        // sha256_cbor("0"): the CBOR text string "0" is 0x61 0x30
        byte[] expected = MessageDigest.getInstance("SHA-256").digest(new byte[] {0x61, 0x30});
        assertArrayEquals(expected, TokenHashChain.sha256Cbor("0").root());
        assertNotEquals(HEX.formatHex(expected), HEX.formatHex(TokenHashChain.sha256Cbor("1").root()));
    }

    @Test
    void continuingFromAnyChunkEqualsHashingTheWhole() {
        int[] tokens = new Random(5).ints(9 * 16, 0, 200_000).toArray();
        for (TokenHashChain chain : List.of(TokenHashChain.blake3(), TokenHashChain.sha256Cbor("0"))) {
            byte[] whole = new byte[32 * 9];
            chain.hashChunks(tokens, 16, 0, 9, whole);
            for (int split = 0; split <= 9; split++) {
                byte[] pieces = new byte[32 * 9];
                chain.hashChunks(tokens, 16, 0, split, pieces);
                chain.hashChunks(tokens, 16, split, 9, pieces);
                assertArrayEquals(whole, pieces, chain.name() + " split at " + split);
            }
        }
    }

    @Test
    void aChangeInOneChunkChangesItAndEveryLaterOneOnly() {
        int[] a = new Random(6).ints(4 * 256, 0, 150_000).toArray();
        int[] b = a.clone();
        b[2 * 256 + 17] += 1;
        for (TokenHashChain chain : List.of(TokenHashChain.blake3(), TokenHashChain.sha256Cbor("0"))) {
            byte[] ha = new byte[128];
            byte[] hb = new byte[128];
            chain.hashChunks(a, 256, 0, 4, ha);
            chain.hashChunks(b, 256, 0, 4, hb);
            for (int c = 0; c < 4; c++) {
                String left = HEX.formatHex(ha, 32 * c, 32 * c + 32);
                String right = HEX.formatHex(hb, 32 * c, 32 * c + 32);
                if (c < 2) {
                    assertEquals(left, right, chain.name() + " chunk " + c);
                } else {
                    assertNotEquals(left, right, chain.name() + " chunk " + c);
                }
            }
        }
    }

    @Test
    void aNegativeTokenIsItsThirtyTwoBitsForBlake3() {
        // Python's struct.pack(">I") refuses -1; the Java chain encodes its bits, as 4294967295 would be
        TokenHashChain chain = TokenHashChain.blake3();
        byte[] root = chain.root();
        byte[] out = new byte[32];
        chain.chunk(root, 0, new int[] {-1}, 0, 1, out, 0);
        Blake3Digest digest = new Blake3Digest(256);
        digest.update(root, 0, 32);
        digest.update(new byte[] {-1, -1, -1, -1}, 0, 4);
        byte[] expected = new byte[32];
        digest.doFinal(expected, 0);
        assertArrayEquals(expected, out);
    }

    @Test
    void chunksThatDoNotFitAreRefused() {
        TokenHashChain chain = TokenHashChain.blake3();
        assertThrows(IllegalArgumentException.class, () -> chain.hashChunks(new int[7], 4, 0, 2, new byte[64]), "8 tokens needed");
        assertThrows(IllegalArgumentException.class, () -> chain.hashChunks(new int[8], 4, 0, 2, new byte[63]), "64 bytes needed");
        assertThrows(IllegalArgumentException.class, () -> chain.hashChunks(new int[8], 4, 2, 1, new byte[64]));
        assertThrows(IllegalArgumentException.class, () -> chain.hashChunks(new int[8], 0, 0, 0, new byte[64]));
    }

    @Test
    void theNamesAreTheFlagValues() {
        assertEquals("blake3", TokenHashChain.blake3().name());
        assertEquals("sha256_cbor", TokenHashChain.sha256Cbor("0").name());
    }
}
