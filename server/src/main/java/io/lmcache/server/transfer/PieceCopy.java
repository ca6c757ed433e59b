package io.lmcache.server.transfer;

import java.lang.foreign.MemorySegment;

/** How a CPU worker's piece is copied between its shm tensor and the pool ({@link HostCopies} holds one for the server). */
@FunctionalInterface
public interface PieceCopy {
    /** {@code MemorySegment.copy}: ordinary stores; the server's where {@link StreamingCopy} is absent or turned off. */
    PieceCopy JAVA = MemorySegment::copy;

    /** Copies {@code length} bytes; a fault of either side (a truncated shm segment) throws, never ends the process. */
    void copy(MemorySegment from, long fromOffset, MemorySegment to, long toOffset, long length);
}
