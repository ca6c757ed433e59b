package io.lmcache.server.kvapi;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.lmcache.server.protocol.WireField;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The frames of LMCache's KV bytes stream, v1 ({@code lmcache/v1/multiprocess/http_apis/kv_protocol.py@9b3f101e}, whose
 * {@code _FrameDecoder} and {@code _decode_header} this follows): {@code uint32 BE header_len | uint64 BE payload_len | header
 * (UTF-8 compact JSON object with version, type, payload_length) | payload}. Unlike LMCache's decoder, which buffers a whole frame
 * before looking at it, {@link Reader} checks both lengths before allocating and hands the payload out as it arrives.
 */
public final class KvFrames {
    public static final String MEDIA_TYPE = "application/x-lmcache-kv-stream; v=1";
    public static final int VERSION = 1;
    /** LMCache's {@code _MAX_HEADER_BYTES}. */
    public static final int MAX_HEADER_BYTES = 1 << 20;
    /** {@code struct.Struct("!IQ")}: the two lengths. */
    public static final int PREFIX_BYTES = 12;
    private static final ObjectMapper JSON = new ObjectMapper();

    private KvFrames() {}

    /** A stream that breaks the framing or a frame's contract: LMCache's {@code ValueError}, a 400. */
    public static final class FrameException extends Exception {
        private static final long serialVersionUID = 1L;

        public FrameException(String message) {
            super(message, null, false, false);
        }
    }

    /** A header's fields: strings, ints (as longs), int lists (as int[]); any other JSON value is {@link #OTHER}. */
    public record Header(Map<String, Object> fields) {
        static final Object OTHER = new Object();

        public String type() {
            return (String) fields.get("type");
        }

        public long requireInt(String key) throws FrameException {
            if (fields.get(key) instanceof Long value) {
                return value;
            }
            throw new FrameException("KV frame field '" + key + "' must be an int");
        }

        public String requireString(String key) throws FrameException {
            if (fields.get(key) instanceof String value) {
                return value;
            }
            throw new FrameException("KV frame field '" + key + "' must be a string");
        }

        public String optionalString(String key) throws FrameException {
            return fields.containsKey(key) ? requireString(key) : "";
        }

        public int[] requireIntList(String key) throws FrameException {
            if (fields.get(key) instanceof int[] value) {
                return value;
            }
            throw new FrameException("KV frame field '" + key + "' must be a list of ints");
        }

        public int[] requireShape4(String key) throws FrameException {
            int[] shape = requireIntList(key);
            if (shape.length != 4) {
                throw new FrameException("KV frame field '" + key + "' must contain 4 dimensions");
            }
            return shape;
        }

        public void requireType(String expected) throws FrameException {
            if (!expected.equals(type())) {
                throw new FrameException("expected '" + expected + "' frame, got '" + type() + "'");
            }
        }
    }

    /** A frame's header (of {@code headerLength} bytes on the wire) and the length of its payload, which {@link Reader#readPayload} reads. */
    public record Frame(Header header, int headerLength, long payloadLength) {}

    /**
     * A frame's prefix and header ({@code version}, {@code type}, {@code payload_length} first, then {@code fields}); the payload
     * of {@code payloadLength} bytes follows it on the wire.
     */
    public static byte[] encodeHead(String type, Map<String, Object> fields, long payloadLength) {
        Map<String, Object> header = new LinkedHashMap<>();
        header.put("version", VERSION);
        header.put("type", type);
        header.put("payload_length", payloadLength);
        for (Map.Entry<String, Object> field : fields.entrySet()) {
            if (header.putIfAbsent(field.getKey(), field.getValue()) != null) {
                throw new IllegalArgumentException("reserved frame header field " + field.getKey());
            }
        }
        byte[] json;
        try {
            json = JSON.writeValueAsBytes(header);
        } catch (JacksonException e) {
            throw new IllegalArgumentException(e);
        }
        return ByteBuffer.allocate(PREFIX_BYTES + json.length).putInt(json.length).putLong(payloadLength).put(json).array();
    }

    /** Reads frames off a body, one at a time; a frame's payload must be read (or skipped) before the next frame. */
    public static final class Reader {
        private final InputStream in;
        private final byte[] prefix = new byte[PREFIX_BYTES];
        private long payloadLeft;

        public Reader(InputStream in) {
            this.in = in;
        }

        /**
         * The next frame, or null where the stream ends on a frame boundary. A payload longer than {@code maxPayload} or a header
         * longer than {@code maxHeader} (at most {@link #MAX_HEADER_BYTES}) is refused from the prefix alone, before any allocation.
         */
        public Frame next(long maxPayload, int maxHeader) throws FrameException, IOException {
            if (payloadLeft != 0) {
                throw new IllegalStateException("the previous frame's payload was not read");
            }
            int got = in.readNBytes(prefix, 0, PREFIX_BYTES);
            if (got == 0) {
                return null;
            }
            if (got < PREFIX_BYTES) {
                throw new FrameException("truncated KV frame stream");
            }
            ByteBuffer lengths = ByteBuffer.wrap(prefix);
            long headerLength = Integer.toUnsignedLong(lengths.getInt());
            long payloadLength = lengths.getLong();
            if (headerLength > Math.min(MAX_HEADER_BYTES, maxHeader)) {
                throw new FrameException("KV frame header too large: " + headerLength + " bytes");
            }
            if (payloadLength < 0 || payloadLength > maxPayload) {
                throw new FrameException("KV frame payload of " + Long.toUnsignedString(payloadLength) + " bytes, at most " + maxPayload
                        + " allowed here");
            }
            byte[] json = in.readNBytes((int) headerLength);
            if (json.length < headerLength) {
                throw new FrameException("truncated KV frame stream");
            }
            Header header = decodeHeader(json, payloadLength);
            payloadLeft = payloadLength;
            return new Frame(header, json.length, payloadLength);
        }

        /** Reads {@code length} bytes of the current frame's payload; a stream that ends first is a truncated frame. */
        public void readPayload(byte[] into, int offset, int length) throws FrameException, IOException {
            if (length > payloadLeft) {
                throw new IllegalStateException("reading past the frame's payload");
            }
            if (in.readNBytes(into, offset, length) != length) {
                throw new FrameException("truncated KV frame stream");
            }
            payloadLeft -= length;
        }
    }

    /** LMCache's {@code _decode_header}: a JSON object with {@code version} 1, a string {@code type}, the frame's payload length. */
    static Header decodeHeader(byte[] json, long payloadLength) throws FrameException {
        Map<String, Object> fields = new HashMap<>();
        try (JsonParser parser = JSON.getFactory().createParser(json)) {
            if (parser.nextToken() != JsonToken.START_OBJECT) {
                throw new FrameException("KV frame header must be a JSON object");
            }
            while (parser.nextToken() == JsonToken.FIELD_NAME) {
                String name = parser.currentName();
                fields.put(name, value(parser, parser.nextToken()));
            }
            if (parser.nextToken() != null) {
                throw new FrameException("invalid KV frame header: data after the object");
            }
        } catch (IOException e) {
            throw new FrameException("invalid KV frame header: not UTF-8 JSON");
        }
        Header header = new Header(fields);
        long version = header.requireInt("version");
        if (version != VERSION) {
            throw new FrameException("unsupported KV protocol version " + version + "; expected " + VERSION);
        }
        long declared = header.requireInt("payload_length");
        if (declared != payloadLength) {
            throw new FrameException("KV frame payload length mismatch: header=" + declared + ", frame=" + payloadLength);
        }
        header.requireString("type");
        return header;
    }

    private static Object value(JsonParser parser, JsonToken token) throws IOException {
        return switch (token) {
            case VALUE_STRING -> parser.getText();
            case VALUE_NUMBER_INT -> parser.getNumberType() == JsonParser.NumberType.BIG_INTEGER ? Header.OTHER : parser.getLongValue();
            case START_ARRAY -> intList(parser);
            default -> {
                parser.skipChildren();
                yield Header.OTHER;
            }
        };
    }

    /** A list of ints straight into an int array (a manifest's token list: never a node per token); anything else is OTHER. */
    private static Object intList(JsonParser parser) throws IOException {
        int[] values = new int[16];
        int n = 0;
        boolean ints = true;
        for (JsonToken token = parser.nextToken(); token != JsonToken.END_ARRAY; token = parser.nextToken()) {
            if (token == null) {
                throw new EOFException("unterminated list");
            }
            if (!ints || token != JsonToken.VALUE_NUMBER_INT || parser.getNumberType() != JsonParser.NumberType.INT || n == WireField.MAX_TOKENS) {
                ints = false;
                parser.skipChildren();
                continue;
            }
            if (n == values.length) {
                values = Arrays.copyOf(values, (int) Math.min(WireField.MAX_TOKENS, 2L * n));
            }
            values[n++] = parser.getIntValue();
        }
        return ints ? Arrays.copyOf(values, n) : Header.OTHER;
    }
}
