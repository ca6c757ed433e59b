package io.lmcache.server.it;

import static io.lmcache.server.testing.TestClient.pack;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.WireField;
import io.lmcache.server.protocol.testing.TestDecoders;
import io.lmcache.server.protocol.testing.WireRequests;
import io.lmcache.server.testing.Http;
import io.lmcache.server.testing.ServerExtension;
import io.lmcache.server.testing.TestClient;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The wire-limit table against the real server, generated from the table (WireLimitsTest does the same for the decoder alone,
 * for every field at every size): for every op and listed field whose generated request stays small, a request with the
 * field at its limit + 1 gets the op's failure value (the reply a request that cannot be decoded at all gets) and counts
 * {@code lmcache_mp_wire_limit_refusals_total{op,field}} once; the same request at the limit is not refused by the decoder.
 */
class WireLimitsIT {
    /** Generated requests up to this size are sent (the million-element arrays are the decoder test's alone). */
    private static final int MAX_REQUEST_BYTES = 256 * 1024;
    private static final byte[] INVALID_MSGPACK = {(byte) 0xc1};

    @RegisterExtension
    static final ServerExtension SERVER = ServerExtension.withFlags();

    private record Case(Op op, WireField field) {}

    private static List<Case> cases() {
        List<Case> out = new ArrayList<>();
        for (Op op : Op.values()) {
            if (TestDecoders.of(op) == null) {
                continue;
            }
            for (WireField field : WireField.of(op)) {
                if (bytes(WireRequests.of(op, field, field.max() + 1)) <= MAX_REQUEST_BYTES) {
                    out.add(new Case(op, field));
                }
            }
        }
        return out;
    }

    @Test
    void overTheLimitGetsTheFailureValueAndCountsOnceAtTheLimitIsNotRefused() {
        List<Case> cases = cases();
        assertTrue(cases.size() > 60, "most of the table is sent: " + cases.size() + " cases");
        for (Case c : cases) {
            // what the op answers to a request it cannot decode at all: its failure value
            TestClient.Reply failure = call(c.op(), new byte[][] {INVALID_MSGPACK});

            double refusals = refusals(c);
            double badRequests = overLimit();
            TestClient.Reply refused = call(c.op(), WireRequests.of(c.op(), c.field(), c.field().max() + 1));
            assertArrayEquals(failure.payload(), refused.payload(), c + ": the failure value");
            assertEquals(failure.frames(), refused.frames(), c + ": the failure value's frames");
            assertEquals(refusals + 1, refusals(c), c + ": counted once by op and field");
            assertEquals(badRequests + 1, overLimit(), c + ": counted once as a bad request (over_limit)");

            decoded(c.op(), WireRequests.of(c.op(), c.field(), c.field().max()));
            assertEquals(refusals + 1, refusals(c), c + " at its limit is not refused");
            assertEquals(badRequests + 1, overLimit(), c + " at its limit decodes");
        }
        try (TestClient client = new TestClient(SERVER.endpoint())) {
            assertEquals("cd0100", client.call(21).payloadHex(), "still serving");
        }
    }

    /** One request on its own connection (a KV-event subscription then ends with it), and its first reply. */
    private static TestClient.Reply call(Op op, byte[][] payloads) {
        try (TestClient client = new TestClient(SERVER.endpoint())) {
            byte[][] frames = new byte[2 + payloads.length][];
            frames[0] = pack(p -> p.packInt(1));
            frames[1] = op.id() > 0 ? pack(p -> p.packInt(op.id())) : pack(p -> p.packString(op.wireName()));
            System.arraycopy(payloads, 0, frames, 2, payloads.length);
            client.sendRaw(frames);
            TestClient.Reply reply = client.receive(Duration.ofSeconds(10));
            assertNotNull(reply, "no reply to " + op.wireName() + " within 10 s");
            return reply;
        }
    }

    /**
     * Sends a request and waits until the server has decoded it: its reply, or for a KV-event subscription (whose first reply
     * may wait for an event) the reply to a NOOP sent after it (a subscription is decoded on the socket thread, in order).
     */
    private static void decoded(Op op, byte[][] payloads) {
        try (TestClient client = new TestClient(SERVER.endpoint())) {
            byte[][] frames = new byte[2 + payloads.length][];
            frames[0] = pack(p -> p.packInt(1));
            frames[1] = op.id() > 0 ? pack(p -> p.packInt(op.id())) : pack(p -> p.packString(op.wireName()));
            System.arraycopy(payloads, 0, frames, 2, payloads.length);
            client.sendRaw(frames);
            client.sendRaw(pack(p -> p.packInt(2)), pack(p -> p.packInt(Op.NOOP.id())));
            byte[] awaited = pack(p -> p.packInt(op == Op.SUBSCRIBE_KV_EVENTS ? 2 : 1));
            TestClient.Reply reply;
            do {
                reply = client.receive(Duration.ofSeconds(10));
                assertNotNull(reply, "no reply to " + op.wireName() + " within 10 s");
            } while (!Arrays.equals(awaited, reply.uid()));
        }
    }

    private static double refusals(Case c) {
        return Http.metric(SERVER.server(), "lmcache_mp_wire_limit_refusals_total", "op", c.op().wireName(), "field", c.field().wireName());
    }

    private static double overLimit() {
        return Http.metric(SERVER.server(), "lmcache_mp_bad_requests_total", "reason", "over_limit");
    }

    private static int bytes(byte[][] frames) {
        int total = 0;
        for (byte[] frame : frames) {
            total += frame.length;
        }
        return total;
    }
}
