package io.lmcache.server.l2.s3;

import io.lmcache.server.l2.redis.LentBuffers;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;

/**
 * One caller-owned L1 buffer lent to the HTTP client for one request: a PUT's bytes are copied out of it a chunk at a time, a GET's
 * body is copied into it at its offsets, under this monitor. Once the key has answered the buffer goes back ({@link #revoke}): a
 * request the client still holds (a body after a timeout) then neither reads nor writes it, so a key never gets another object's
 * bytes and L1 may free or refill the buffer.
 */
final class LentSegment implements LentBuffers.Revocable {
    private final MemorySegment segment;
    private boolean revoked;

    LentSegment(MemorySegment segment) {
        this.segment = segment;
    }

    long size() {
        return segment.byteSize();
    }

    /** {@code length} bytes from {@code offset} in a buffer of their own (the client may hold it past the answer); null once revoked. */
    synchronized ByteBuffer copyOut(long offset, int length) {
        if (revoked) {
            return null;
        }
        ByteBuffer chunk = ByteBuffer.allocate(length);
        MemorySegment.copy(segment, offset, MemorySegment.ofBuffer(chunk), 0, length);
        return chunk;
    }

    /** {@code part} at {@code offset}; false (nothing copied) once revoked or when it would run past the end. */
    synchronized boolean copyIn(long offset, ByteBuffer part) {
        int length = part.remaining();
        if (revoked || offset + length > segment.byteSize()) {
            return false;
        }
        MemorySegment.copy(MemorySegment.ofBuffer(part), 0, segment, offset, length);
        return true;
    }

    /** Gives the buffer back; waits for a copy in progress, after which nothing touches it again. */
    @Override
    public synchronized void revoke() {
        revoked = true;
    }
}
