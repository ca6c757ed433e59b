package io.lmcache.server.http;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.io.InputStream;
import java.util.Arrays;

/**
 * The streaming reader of a route's JSON request body, one owner for the routes that take LMCache's pydantic-shaped bodies
 * (the fleet's {@code POST /cache/prefetches}, the KV bytes API's retrieve and lookup). A body is one JSON object read field by
 * field, never a tree of nodes; a value of the wrong type is pydantic's 422, text that is not JSON too, and an int list goes
 * straight into an int array that never grows past its limit: the element over it is refused before a byte after it is read.
 */
public final class JsonBody {
    private static final JsonFactory FACTORY = new JsonFactory();
    /** An int list's first array: small lists stay small, large ones double up to their limit. */
    private static final int FIRST_CAPACITY = 1024;

    private JsonBody() {}

    /** A request answered with an error status; the message is its {@code detail}. */
    public static final class Refused extends Exception {
        private static final long serialVersionUID = 1L;
        private final int status;

        public Refused(int status, String message) {
            super(message, null, false, false);
            this.status = status;
        }

        public int status() {
            return status;
        }
    }

    /**
     * An int list's bound: at most {@code maxElements}, and the answer to a list longer than that (the routes differ: LMCache's
     * prefetch service says 400, its KV bytes API's pydantic model 422).
     */
    public record IntList(int maxElements, int overLimitStatus, String overLimitMessage) {
        public IntList {
            if (maxElements < 0 || overLimitStatus < 400 || overLimitStatus > 599) {
                throw new IllegalArgumentException("an int list of at most " + maxElements + " refused with " + overLimitStatus);
            }
        }
    }

    /** Reads the object's fields off {@code body} and makes the route's value of them. */
    @FunctionalInterface
    public interface Parse<T> {
        T parse(Reader body) throws Refused, IOException;
    }

    /**
     * Reads at most {@code maxBytes} of a body that is parsed only whole (413 above them, the rest left unread): a body bounded
     * in bytes whether or not it declared its length.
     */
    public static byte[] bounded(InputStream in, int maxBytes) throws Refused, IOException {
        byte[] bytes = in.readNBytes(maxBytes + 1);
        if (bytes.length > maxBytes) {
            throw new Refused(413, "the body is larger than " + maxBytes + " bytes");
        }
        return bytes;
    }

    /** Parses a body held whole ({@link #bounded}). */
    public static <T> T read(byte[] body, Parse<T> parse) throws Refused, IOException {
        try (JsonParser parser = FACTORY.createParser(body)) {
            return read(parser, parse);
        } catch (JacksonException e) {
            throw notJson();
        }
    }

    /** Parses a body as it streams in; the caller bounds the stream (a declared length checked up front). */
    public static <T> T read(InputStream body, Parse<T> parse) throws Refused, IOException {
        try (JsonParser parser = FACTORY.createParser(body)) {
            return read(parser, parse);
        } catch (JacksonException e) {
            throw notJson();
        }
    }

    private static <T> T read(JsonParser parser, Parse<T> parse) throws Refused, IOException {
        if (parser.nextToken() != JsonToken.START_OBJECT) {
            throw new Refused(422, "the body must be a JSON object");
        }
        return parse.parse(new Reader(parser));
    }

    private static Refused notJson() {
        return new Refused(422, "the body is not JSON");
    }

    /** The body's object, one field at a time: {@link #nextField} then one read of its value (or {@link #skip}). */
    public static final class Reader {
        private final JsonParser parser;
        private String field;
        private JsonToken value;

        private Reader(JsonParser parser) {
            this.parser = parser;
        }

        /** Steps onto the next field's value; false at the object's end. */
        public boolean nextField() throws IOException {
            if (parser.nextToken() != JsonToken.FIELD_NAME) {
                return false;
            }
            field = parser.currentName();
            value = parser.nextToken();
            return true;
        }

        /** The field's name. */
        public String field() {
            return field;
        }

        /** The token the field's value starts with. */
        public JsonToken value() {
            return value;
        }

        /** The token after the one the reader stands on (a route's own reading of a structured value). */
        public JsonToken nextToken() throws IOException {
            return parser.nextToken();
        }

        /** A field the route does not know: its value is passed over, children and all. */
        public void skip() throws IOException {
            parser.skipChildren();
        }

        public String text() throws Refused, IOException {
            if (value != JsonToken.VALUE_STRING) {
                throw new Refused(422, field + " must be a string");
            }
            return parser.getText();
        }

        /** A 32-bit int; anything else is 422 "{@code <field> must be <what>}". */
        public int integer(String what) throws Refused, IOException {
            if (!isInt(value)) {
                throw new Refused(422, field + " must be " + what);
            }
            return parser.getIntValue();
        }

        /**
         * A list of 32-bit ints, read straight into an int array: an element of another type is 422, one past
         * {@code limit.maxElements()} the limit's answer, checked before it is stored or anything after it is read.
         */
        public int[] ints(IntList limit) throws Refused, IOException {
            if (value != JsonToken.START_ARRAY) {
                throw new Refused(422, field + " must be a list of ints");
            }
            int[] ints = new int[Math.min(FIRST_CAPACITY, limit.maxElements())];
            int n = 0;
            for (JsonToken token = parser.nextToken(); token != JsonToken.END_ARRAY; token = parser.nextToken()) {
                if (!isInt(token)) {
                    throw new Refused(422, field + "[" + n + "] is not an int");
                }
                if (n == limit.maxElements()) {
                    throw new Refused(limit.overLimitStatus(), limit.overLimitMessage());
                }
                if (n == ints.length) {
                    ints = Arrays.copyOf(ints, (int) Math.min(limit.maxElements(), 2L * n));
                }
                ints[n++] = parser.getIntValue();
            }
            return n == ints.length ? ints : Arrays.copyOf(ints, n);
        }

        private boolean isInt(JsonToken token) throws IOException {
            return token == JsonToken.VALUE_NUMBER_INT && parser.getNumberType() == JsonParser.NumberType.INT;
        }
    }
}
