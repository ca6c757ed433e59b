package io.lmcache.server.loop;

import io.lmcache.server.protocol.Op;

/**
 * A reply on its way to the socket thread; {@code payload} null = no payload frame (a None reply). {@code timed}: the
 * STORE or RETRIEVE whose request path times its wait in the queue ({@link RequestPhase#SEND}, from {@code queuedNs}) and
 * whose timeline (received, queued, sent) the socket thread keeps among the recent ones; null for every other reply.
 */
public record Outbound(byte[] identity, byte[] uid, byte[] op, byte[] payload, Op timed, long receivedNs, long queuedNs) {
    /** What a queued reply holds besides its frames' bytes: the record, four arrays and the queue's node, rounded up. */
    private static final int OVERHEAD_BYTES = 128;

    /** A reply whose wait in the queue is not timed. */
    public Outbound(byte[] identity, byte[] uid, byte[] op, byte[] payload) {
        this(identity, uid, op, payload, null, 0, 0);
    }

    /** The heap a queued reply occupies, roughly: what the reply queue's byte budget counts. */
    public long bytes() {
        return OVERHEAD_BYTES + identity.length + uid.length + op.length + (payload == null ? 0 : payload.length);
    }
}
