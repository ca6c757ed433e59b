package io.lmcache.server.loop;

/** A reply on its way to the socket thread; {@code payload} null = no payload frame (a None reply). */
public record Outbound(byte[] identity, byte[] uid, byte[] op, byte[] payload) {
    /** What a queued reply holds besides its frames' bytes: the record, four arrays and the queue's node, rounded up. */
    private static final int OVERHEAD_BYTES = 128;

    /** The heap a queued reply occupies, roughly: what the reply queue's byte budget counts. */
    public long bytes() {
        return OVERHEAD_BYTES + identity.length + uid.length + op.length + (payload == null ? 0 : payload.length);
    }
}
