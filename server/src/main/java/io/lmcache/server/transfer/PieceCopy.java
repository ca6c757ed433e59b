package io.lmcache.server.transfer;

import java.lang.foreign.MemorySegment;

/**
 * How a CPU worker's pieces are copied between its shm tensors and the pool ({@link HostCopies} holds one for the server):
 * one {@link Batch} per run of a copy, on the thread that copies the run.
 */
@FunctionalInterface
public interface PieceCopy {
    /** {@code MemorySegment.copy}, piece by piece: ordinary stores; the server's where {@link StreamingCopy} is absent or off. */
    PieceCopy JAVA = pool -> MemorySegment::copy;

    /** A batch for one run between tensors and {@code pool}, used by one thread. */
    Batch batch(MemorySegment pool);

    /** A run's pieces: each {@link #copy} may be held until {@link #flush}, which the run calls once after its last piece. */
    @FunctionalInterface
    interface Batch {
        /** Copies {@code length} bytes, now or at {@link #flush}; bounds are checked here. */
        void copy(MemorySegment from, long fromOffset, MemorySegment to, long toOffset, long length);

        /** Copies whatever is held; a fault of either side (a truncated shm segment) throws, never ends the process. */
        default void flush() {
            // nothing held
        }
    }
}
