package io.lmcache.server.http;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** The shared JSON body reader: its limits, the types it refuses, and that an over-long list is refused before more is read. */
class JsonBodyTest {
    private static final JsonBody.IntList THREE = new JsonBody.IntList(3, 400, "more than three");

    /** What a test body's fields read to: {@code t} an int list, {@code s} a string, {@code i} an int; others skipped. */
    private record Fields(int[] ints, String text, Integer integer) {}

    private static Fields parse(String json, JsonBody.IntList limit) throws JsonBody.Refused, IOException {
        return JsonBody.read(json.getBytes(StandardCharsets.UTF_8), body -> fields(body, limit));
    }

    private static Fields fields(JsonBody.Reader body, JsonBody.IntList limit) throws JsonBody.Refused, IOException {
        int[] ints = null;
        String text = null;
        Integer integer = null;
        while (body.nextField()) {
            switch (body.field()) {
                case "t" -> ints = body.ints(limit);
                case "s" -> text = body.text();
                case "i" -> integer = body.integer("an int");
                default -> body.skip();
            }
        }
        return new Fields(ints, text, integer);
    }

    private static JsonBody.Refused refused(String json, JsonBody.IntList limit) {
        return assertThrows(JsonBody.Refused.class, () -> parse(json, limit), json);
    }

    private static String list(int n) {
        return IntStream.range(0, n).mapToObj(Integer::toString).collect(Collectors.joining(",", "[", "]"));
    }

    @Test
    void aListExactlyAtItsLimitIsReadWholeAndOneMoreGetsTheLimitsAnswer() throws Exception {
        assertArrayEquals(new int[] {7, -1, 2147483647}, parse("{\"t\": [7, -1, 2147483647]}", THREE).ints());
        assertArrayEquals(new int[0], parse("{\"t\": []}", THREE).ints());
        JsonBody.Refused over = refused("{\"t\": [1, 2, 3, 4]}", THREE);
        assertEquals(400, over.status());
        assertEquals("more than three", over.getMessage());

        // a limit past the first array's capacity and not a power of two: the array grows to the limit exactly, not beyond
        JsonBody.IntList odd = new JsonBody.IntList(1500, 422, "more than 1500");
        int[] read = parse("{\"t\": " + list(1500) + "}", odd).ints();
        assertEquals(1500, read.length);
        assertEquals(1499, read[1499]);
        JsonBody.Refused oneOver = refused("{\"t\": " + list(1501) + "}", odd);
        assertEquals(422, oneOver.status());
        assertEquals("more than 1500", oneOver.getMessage());

        JsonBody.IntList none = new JsonBody.IntList(0, 413, "no ints here");
        assertArrayEquals(new int[0], parse("{\"t\": []}", none).ints());
        assertEquals(413, refused("{\"t\": [0]}", none).status());
    }

    @Test
    void anElementOfAnotherTypeIs422NamingItsIndexEvenAtTheLimit() {
        for (String element : new String[] {"1.5", "1e3", "2147483648", "-2147483649", "\"1\"", "true", "null", "[1]", "{\"a\": 1}"}) {
            JsonBody.Refused e = refused("{\"t\": [0, " + element + "]}", THREE);
            assertEquals(422, e.status(), element);
            assertEquals("t[1] is not an int", e.getMessage(), element);
        }
        // the element's type is checked before the limit, as both routes did
        JsonBody.Refused atLimit = refused("{\"t\": [0, 1, 2, \"x\"]}", THREE);
        assertEquals(422, atLimit.status());
        assertEquals("t[3] is not an int", atLimit.getMessage());
    }

    @Test
    void valuesOfTheWrongTypeAre422NamingTheirField() {
        for (String value : new String[] {"1", "\"1,2\"", "{}", "null", "true"}) {
            JsonBody.Refused e = refused("{\"t\": " + value + "}", THREE);
            assertEquals(422, e.status(), value);
            assertEquals("t must be a list of ints", e.getMessage(), value);
        }
        for (String value : new String[] {"1", "[]", "{}", "null", "false"}) {
            JsonBody.Refused e = refused("{\"s\": " + value + "}", THREE);
            assertEquals(422, e.status(), value);
            assertEquals("s must be a string", e.getMessage(), value);
        }
        for (String value : new String[] {"1.0", "\"1\"", "4294967296", "null", "[1]"}) {
            JsonBody.Refused e = refused("{\"i\": " + value + "}", THREE);
            assertEquals(422, e.status(), value);
            assertEquals("i must be an int", e.getMessage(), value);
        }
    }

    @Test
    void aBodyThatIsNoObjectOrNoJsonIs422() {
        for (String body : new String[] {"[]", "\"text\"", "1", "null", ""}) {
            JsonBody.Refused e = refused(body, THREE);
            assertEquals(422, e.status(), body);
            assertEquals("the body must be a JSON object", e.getMessage(), body);
        }
        for (String body : new String[] {"{", "{\"t\": [1, 2", "{\"t\": [1,, 2]}", "{\"s\": \"open}", "{t: 1}", "{\"a\": {\"b\": [}}", "nope"}) {
            JsonBody.Refused e = refused(body, THREE);
            assertEquals(422, e.status(), body);
            assertEquals("the body is not JSON", e.getMessage(), body);
        }
    }

    @Test
    void unknownFieldsAreSkippedNestedValuesAndAllAndKnownOnesRead() throws Exception {
        Fields read = parse("{\"x\": {\"t\": [\"no\"], \"y\": [[{}]]}, \"t\": [5], \"z\": [1, {\"s\": 2}], \"s\": \"ok\", \"i\": -3}", THREE);
        assertArrayEquals(new int[] {5}, read.ints());
        assertEquals("ok", read.text());
        assertEquals(-3, read.integer());
        assertNull(parse("{}", THREE).ints());
    }

    @Test
    void aListOverItsLimitIsRefusedBeforeTheRestOfTheBodyIsRead() throws Exception {
        // garbage right after the element over the limit: the limit's answer, not "not JSON", so nothing after it was parsed
        JsonBody.Refused e = refused("{\"t\": [1, 2, 3, 4, this is not json", THREE);
        assertEquals(400, e.status());
        assertEquals("more than three", e.getMessage());

        // an endless list streamed in: refused after reading the limit's elements and at most a parser buffer more
        int limit = 10_000;
        CountingList endless = new CountingList();
        JsonBody.Refused streamed = assertThrows(JsonBody.Refused.class,
                () -> JsonBody.read(endless, body -> fields(body, new JsonBody.IntList(limit, 422, "too many"))));
        assertEquals(422, streamed.status());
        assertEquals("too many", streamed.getMessage());
        assertTrue(endless.read <= 2L * (limit + 1) + 64 * 1024, "read " + endless.read + " bytes");
    }

    @Test
    void aBoundedBodyMayHaveItsBoundExactlyAndOneByteMoreIs413() throws Exception {
        byte[] eight = "{\"t\":[]}".getBytes(StandardCharsets.UTF_8);
        assertArrayEquals(eight, JsonBody.bounded(new ByteArrayInputStream(eight), 8));
        JsonBody.Refused e = assertThrows(JsonBody.Refused.class, () -> JsonBody.bounded(new ByteArrayInputStream(eight), 7));
        assertEquals(413, e.status());
        assertEquals("the body is larger than 7 bytes", e.getMessage());
        // the bound holds for a body of no declared end: one byte past it is all that is read
        CountingList endless = new CountingList();
        assertThrows(JsonBody.Refused.class, () -> JsonBody.bounded(endless, 1000));
        assertEquals(1001, endless.read);
    }

    @Test
    void aLimitIsANonNegativeCountAnsweredWithAnErrorStatus() {
        assertThrows(IllegalArgumentException.class, () -> new JsonBody.IntList(-1, 400, "x"));
        assertThrows(IllegalArgumentException.class, () -> new JsonBody.IntList(1, 200, "x"));
        assertThrows(IllegalArgumentException.class, () -> new JsonBody.IntList(1, 600, "x"));
    }

    /** {@code {"t": [0,0,0,...} without end, counting the bytes read from it. */
    private static final class CountingList extends InputStream {
        private static final byte[] HEAD = "{\"t\": [".getBytes(StandardCharsets.UTF_8);
        long read;

        @Override
        public int read() {
            long at = read++;
            if (at < HEAD.length) {
                return HEAD[(int) at];
            }
            return (at - HEAD.length) % 2 == 0 ? '0' : ',';
        }

        @Override
        public int read(byte[] into, int offset, int length) {
            for (int i = 0; i < length; i++) {
                into[offset + i] = (byte) read();
            }
            return length;
        }
    }
}
