package io.lmcache.server.kvapi;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.kvapi.KvFrames.Frame;
import io.lmcache.server.kvapi.KvFrames.FrameException;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The stream revision's frame codec (LMCache {@code kv_protocol.py@9b3f101e}): a round trip, and every way a frame can be wrong. */
class KvFramesTest {

    @Test
    void framesRoundTripInOrderAndTheStreamEndsOnABoundary() throws Exception {
        Map<String, Object> manifest = new LinkedHashMap<>();
        manifest.put("model_name", "m");
        manifest.put("tokens", new int[] {1, 2, 3});
        manifest.put("shape", new int[] {2, 4, 256, 128});
        manifest.put("dtype", "torch.bfloat16");
        byte[] payload = {9, 8, 7, 6, 5};
        ByteArrayOutputStream wire = new ByteArrayOutputStream();
        wire.write(KvFrames.encodeHead("store_manifest", manifest, 0));
        wire.write(KvFrames.encodeHead("store_chunk", Map.of("chunk_index", 0), payload.length));
        wire.write(payload);
        byte[] head = KvFrames.encodeHead("store_chunk", Map.of("chunk_index", 0), 5);
        int jsonLength = ByteBuffer.wrap(head).getInt();
        assertEquals("{\"version\":1,\"type\":\"store_chunk\",\"payload_length\":5,\"chunk_index\":0}",
                new String(head, KvFrames.PREFIX_BYTES, jsonLength, StandardCharsets.UTF_8), "LMCache's compact header, protocol fields first");

        KvFrames.Reader reader = new KvFrames.Reader(new ByteArrayInputStream(wire.toByteArray()));
        Frame first = reader.next(0, KvFrames.MAX_HEADER_BYTES);
        assertEquals("store_manifest", first.header().type());
        assertEquals("m", first.header().requireString("model_name"));
        assertArrayEquals(new int[] {1, 2, 3}, first.header().requireIntList("tokens"));
        assertArrayEquals(new int[] {2, 4, 256, 128}, first.header().requireShape4("shape"));
        assertEquals("", first.header().optionalString("cache_salt"));
        Frame second = reader.next(5, KvFrames.MAX_HEADER_BYTES);
        assertEquals(0, second.header().requireInt("chunk_index"));
        byte[] read = new byte[5];
        reader.readPayload(read, 0, 5);
        assertArrayEquals(payload, read);
        assertNull(reader.next(5, KvFrames.MAX_HEADER_BYTES), "a clean end");
    }

    @Test
    void aHeaderOrPayloadOverItsLimitIsRefusedFromThePrefixAlone() {
        // the prefix claims more than the limit and nothing follows: only the lengths can have refused it
        FrameException header = refused(prefix(KvFrames.MAX_HEADER_BYTES + 1, 0), 0);
        assertTrue(header.getMessage().contains("header too large"), header.getMessage());
        assertTrue(refused(prefix(0xFFFFFFFFL, 0), 0).getMessage().contains("header too large"), "uint32 max, unsigned");
        assertTrue(refused(prefix(10, 1L << 40), 1 << 20).getMessage().contains("payload"));
        assertTrue(refused(prefix(10, -1L), Long.MAX_VALUE).getMessage().contains("payload"), "uint64 max is over any limit");
        assertTrue(refused(prefix(100, 0), 0, 99).getMessage().contains("header too large"), "a caller's tighter header bound");
    }

    @Test
    void truncatedStreamsAreRefused() throws Exception {
        byte[] whole = KvFrames.encodeHead("store_chunk", Map.of("chunk_index", 0), 4);
        assertTrue(refused(Arrays.copyOf(whole, 5), 4).getMessage().contains("truncated"), "inside the prefix");
        assertTrue(refused(Arrays.copyOf(whole, whole.length - 1), 4).getMessage().contains("truncated"), "inside the header");
        KvFrames.Reader reader = new KvFrames.Reader(new ByteArrayInputStream(concat(whole, new byte[] {1, 2})));
        reader.next(4, KvFrames.MAX_HEADER_BYTES);
        FrameException payload = assertThrows(FrameException.class, () -> reader.readPayload(new byte[4], 0, 4));
        assertTrue(payload.getMessage().contains("truncated"), "inside the payload");
    }

    @Test
    void aHeaderThatBreaksTheContractIsRefused() {
        assertTrue(refusedHeader("{\"version\":2,\"type\":\"store_chunk\",\"payload_length\":0}", 0).contains("version 2"));
        assertTrue(refusedHeader("{\"type\":\"store_chunk\",\"payload_length\":0}", 0).contains("'version' must be an int"));
        assertTrue(refusedHeader("{\"version\":\"1\",\"type\":\"x\",\"payload_length\":0}", 0).contains("'version' must be an int"));
        assertTrue(refusedHeader("{\"version\":1,\"type\":\"store_chunk\",\"payload_length\":3}", 0).contains("mismatch"));
        assertTrue(refusedHeader("{\"version\":1,\"payload_length\":0}", 0).contains("'type' must be a string"));
        assertTrue(refusedHeader("{\"version\":1,\"type\":7,\"payload_length\":0}", 0).contains("'type' must be a string"));
        assertTrue(refusedHeader("[1,2]", 0).contains("JSON object"));
        assertTrue(refusedHeader("{\"version\":1,", 0).contains("invalid"));
        assertTrue(refusedHeader("{\"version\":1,\"type\":\"a\",\"payload_length\":0} {}", 0).contains("invalid"));
        byte[] notUtf8 = {'{', '"', (byte) 0xC3, (byte) 0x28, '"', ':', '1', '}'};
        assertThrows(FrameException.class, () -> KvFrames.decodeHeader(notUtf8, 0));
    }

    @Test
    void typedFieldsRefuseWhatTheyAreNot() throws Exception {
        KvFrames.Header header = KvFrames.decodeHeader(("{\"version\":1,\"type\":\"store_manifest\",\"payload_length\":0,\"tokens\":[1,\"x\"],"
                + "\"shape\":[1,2,3],\"dtype\":3.5,\"big\":[1,99999999999],\"cache_salt\":null}").getBytes(StandardCharsets.UTF_8), 0);
        assertThrows(FrameException.class, () -> header.requireIntList("tokens"), "a list with a string");
        assertThrows(FrameException.class, () -> header.requireIntList("big"), "an int over 32 bits in a token list");
        assertThrows(FrameException.class, () -> header.requireShape4("shape"), "three dimensions");
        assertThrows(FrameException.class, () -> header.requireString("dtype"));
        assertThrows(FrameException.class, () -> header.optionalString("cache_salt"), "null is no string");
        assertThrows(FrameException.class, () -> header.requireType("store_chunk"));
        assertThrows(FrameException.class, () -> header.requireInt("missing"));
    }

    private static byte[] prefix(long headerLength, long payloadLength) {
        return ByteBuffer.allocate(KvFrames.PREFIX_BYTES).putInt((int) headerLength).putLong(payloadLength).array();
    }

    private static FrameException refused(byte[] wire, long maxPayload) {
        return refused(wire, maxPayload, KvFrames.MAX_HEADER_BYTES);
    }

    private static FrameException refused(byte[] wire, long maxPayload, int maxHeader) {
        InputStream in = new ByteArrayInputStream(wire);
        return assertThrows(FrameException.class, () -> new KvFrames.Reader(in).next(maxPayload, maxHeader));
    }

    private static String refusedHeader(String json, long payloadLength) {
        byte[] bytes = json.getBytes(StandardCharsets.UTF_8);
        byte[] wire = concat(prefix(bytes.length, payloadLength), bytes);
        return refused(wire, payloadLength).getMessage();
    }

    private static byte[] concat(byte[] a, byte[] b) {
        byte[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }
}
