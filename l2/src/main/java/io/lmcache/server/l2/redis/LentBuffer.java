package io.lmcache.server.l2.redis;

import io.netty.buffer.ByteBuf;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;

/**
 * One caller-owned L1 buffer lent to Lettuce for one command: a SET's bytes are copied out of it
 * into Netty's send buffer, a GET's reply is copied into it, both on a Netty thread and under this
 * monitor. Once the command's task has answered, the buffer goes back to its owner ({@link #revoke}),
 * who may free or refill it: a command Lettuce still holds (a reply after the timeout, a resend
 * after a reconnect) must then neither read nor write it, or a key could get another object's bytes.
 */
final class LentBuffer implements LentBuffers.Revocable {
    private final MemorySegment segment;
    private boolean revoked;

    LentBuffer(MemorySegment segment) {
        this.segment = segment;
    }

    long size() {
        return segment.byteSize();
    }

    /**
     * A SET's value into Netty's buffer (the one copy on the way out). Its length is already on the wire, so a buffer given back
     * cannot be skipped: the throw makes Lettuce close the connection, and the half-sent command dies with it.
     */
    synchronized void writeTo(ByteBuf target) {
        if (revoked) {
            throw new IllegalStateException("an L2 buffer was resent after its task had answered; closing the connection instead");
        }
        target.writeBytes(segment.asByteBuffer());
    }

    /** A GET's reply into the buffer (the one copy on the way in); false when the length differs or the buffer was given back. */
    synchronized boolean readFrom(ByteBuffer reply) {
        if (revoked || reply.remaining() != segment.byteSize()) {
            return false;
        }
        MemorySegment.copy(MemorySegment.ofBuffer(reply), 0, segment, 0, segment.byteSize());
        return true;
    }

    /** Gives the buffer back; waits for a copy in progress, after which nothing touches it again. */
    @Override
    public synchronized void revoke() {
        revoked = true;
    }
}
