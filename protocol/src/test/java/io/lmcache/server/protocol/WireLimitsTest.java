package io.lmcache.server.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.lmcache.server.protocol.testing.Golden;
import io.lmcache.server.protocol.testing.TestDecoders;
import io.lmcache.server.protocol.testing.WireRequests;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * The wire-limit table ({@link WireField}) is what the decoder enforces, generated from the table itself: for every op of
 * the op table and every field the table lists for it, a request with that field at its limit decodes and one at limit + 1
 * is refused with {@code over_limit} naming the field; every op the server decodes reads exactly the fields the table lists
 * for it (so a field read without a limit, or listed for the wrong op, fails here); and docs/wire-limits.md is the table.
 */
class WireLimitsTest {
    private static final String TABLE_START = "<!-- wire-limits table: generated from WireField.markdownTable(); WireLimitsTest checks it -->";
    private static final String TABLE_END = "<!-- end of the wire-limits table -->";

    static Stream<Arguments> opsAndFields() {
        List<Arguments> out = new ArrayList<>();
        for (Op op : Op.values()) {
            for (WireField field : WireField.of(op)) {
                out.add(Arguments.of(op, field));
            }
        }
        return out.stream();
    }

    @ParameterizedTest(name = "{0}.{1}")
    @MethodSource("opsAndFields")
    void atTheLimitDecodesAndOneMoreIsRefused(Op op, WireField field) throws Exception {
        byte[][] atLimit = WireRequests.of(op, field, field.max());
        Request decoded = TestDecoders.decode(new RequestDecoder(), op, atLimit, 0, atLimit.length);
        assertEquals(op, decoded.op());

        byte[][] over = WireRequests.of(op, field, field.max() + 1);
        ProtocolException e = assertThrows(ProtocolException.class,
                () -> TestDecoders.decode(new RequestDecoder(), op, over, 0, over.length));
        assertEquals(ProtocolException.Reason.OVER_LIMIT, e.reason(), e.getMessage());
        assertSame(field, e.field(), e.getMessage());
    }

    /** Every op has an entry in both tables; the ones the server does not decode list no field. */
    @Test
    void everyOpIsInTheTableAndTheGenerator() throws Exception {
        for (Op op : Op.values()) {
            Set<WireField> fields = WireField.of(op);
            assertNotNull(fields, op.wireName());
            if (TestDecoders.of(op) == null) {
                assertTrue(fields.isEmpty(), op.wireName() + " is not decoded, yet the table lists fields for it");
                assertNull(WireRequests.of(op), op.wireName());
                continue;
            }
            byte[][] request = WireRequests.of(op);
            assertNotNull(request, "no generated request for " + op.wireName());
            TestDecoders.decode(new RequestDecoder(), op, request, 0, request.length);
        }
    }

    /**
     * The fields a request of each op reads are those the table lists for it, no more (a new field the decoder reads must be
     * a {@link WireField}, as the reader takes no other, and listed for its op) and no fewer (the generated request carries
     * them all, so the limit test above reaches each).
     */
    @Test
    void eachOpReadsExactlyTheFieldsTheTableListsForIt() throws Exception {
        for (Op op : Op.values()) {
            if (TestDecoders.of(op) == null) {
                continue;
            }
            byte[][] request = WireRequests.of(op);
            RequestDecoder decoder = new RequestDecoder();
            TestDecoders.decode(decoder, op, request, 0, request.length);
            assertEquals(WireField.of(op), fields(decoder.fieldsRead()), op.wireName());
        }
    }

    /** The op frame's name is bounded before the op is known: a 64-byte name is looked up, a 65-byte one refused. */
    @Test
    void theOpNameIsBounded() throws Exception {
        RequestDecoder decoder = new RequestDecoder();
        assertNull(decoder.decodeOp(string("x".repeat(WireField.OP.max()))));
        ProtocolException e = assertThrows(ProtocolException.class, () -> decoder.decodeOp(string("x".repeat(WireField.OP.max() + 1))));
        assertSame(WireField.OP, e.field());
    }

    /** A length the frame cannot hold stays {@code oversized} (a lie), whatever the limit: only a real value is over a limit. */
    @Test
    void aDeclaredLengthTheFrameCannotHoldIsOversizedNotOverLimit() throws Exception {
        byte[] frame = string("x".repeat(WireField.REQUEST_ID.max() + 1));
        byte[] cut = Arrays.copyOf(frame, 10);
        ProtocolException e = assertThrows(ProtocolException.class, () -> new RequestDecoder().queryPrefetchStatus(new byte[][] {cut}, 0, 1));
        assertEquals(ProtocolException.Reason.OVERSIZED, e.reason());
        e = assertThrows(ProtocolException.class, () -> new RequestDecoder().queryPrefetchStatus(new byte[][] {frame}, 0, 1));
        assertEquals(ProtocolException.Reason.OVER_LIMIT, e.reason());
    }

    @Test
    void theGeneratedWrapperPickleDecodesAtEverySize() throws Exception {
        for (int bytes : new int[] {WireRequests.MIN_WRAPPER_BYTES, 1000, WireField.WRAPPER_PICKLE.max()}) {
            byte[] pickle = WireRequests.wrapperPickle(bytes);
            assertEquals(bytes, pickle.length);
            assertTrue(WrapperDecoder.decode(pickle) instanceof TensorWrapper.CpuShm);
        }
    }

    /** docs/wire-limits.md carries the table exactly as {@link WireField#markdownTable()} writes it. */
    @Test
    void theDocIsTheTable() throws IOException {
        Path doc = Golden.repoRoot().resolve("docs/wire-limits.md");
        String text = Files.readString(doc, StandardCharsets.UTF_8);
        int start = text.indexOf(TABLE_START);
        int end = text.indexOf(TABLE_END);
        if (start < 0 || end < start) {
            fail(doc + " lacks the markers around the table: " + TABLE_START + " ... " + TABLE_END);
        }
        String table = text.substring(start + TABLE_START.length(), end).strip() + "\n";
        assertEquals(WireField.markdownTable(), table,
                "docs/wire-limits.md differs from WireField: paste WireField.markdownTable() between its markers");
    }

    private static Set<WireField> fields(long bits) {
        EnumSet<WireField> out = EnumSet.noneOf(WireField.class);
        for (WireField f : WireField.values()) {
            if ((bits & (1L << f.ordinal())) != 0) {
                out.add(f);
            }
        }
        return out;
    }

    private static byte[] string(String value) throws IOException {
        try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
            p.packString(value);
            return p.toByteArray();
        }
    }
}
