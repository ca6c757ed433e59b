package io.lmcache.server.transfer;

import io.lmcache.server.cuda.Direction;
import io.lmcache.server.cuda.HeadTranspose;
import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.protocol.Reply;
import java.lang.foreign.MemorySegment;

/**
 * A CPU worker's path: its POSIX shared-memory tensors, copied on the calling thread before the
 * reply, whose event handle is then 64 zero bytes.
 */
public final class HostCopyPath implements CopyPath {
    private static final byte[] NO_EVENT = new byte[64];
    private static final Copied DONE = new Copied(NO_EVENT, true, null);
    private static final Copied FAILED = new Copied(NO_EVENT, false, null);

    private final HostKvTensors tensors;
    private final MemorySegment pool;

    HostCopyPath(HostKvTensors tensors, MemorySegment pool) {
        this.tensors = tensors;
        this.pool = pool;
    }

    @Override
    public Copied copy(Direction direction, PieceSource pieces, byte[] clientEvent, InstanceContext.Lease lease, Completion done) {
        HostCopy copy = new HostCopy(tensors, pool, direction == Direction.TO_POOL);
        try {
            pieces.emit(copy);
        } catch (RuntimeException | InternalError e) {
            done.done(false, copy.bytes, "failed while copying: " + e, System.nanoTime());
            return FAILED;
        }
        done.done(true, copy.bytes, null, System.nanoTime());
        return DONE;
    }

    @Override
    public Reply failure(Direction direction) {
        return FailureReplies.transferFailed();
    }

    @Override
    public void warm(Direction direction, long firstPieceBytes) {
        // the host path copies on this thread: nothing to get ready
    }

    @Override
    public String checkAlive() {
        return tensors.checkAlive();
    }

    @Override
    public void close() {
        tensors.close();
    }

    @Override
    public String kind() {
        return "host";
    }

    @Override
    public String device() {
        return "cpu";
    }

    /**
     * Copies pieces between a worker's shared-memory tensors and the pool, in the direction given; a head-major piece row by
     * row into (or out of) the object's token-major order, by the mapping the GPU kernel uses ({@link HeadTranspose}).
     */
    private static final class HostCopy implements PieceSink {
        private final HostKvTensors tensors;
        private final MemorySegment pool;
        private final boolean toPool;
        long bytes;

        HostCopy(HostKvTensors tensors, MemorySegment pool, boolean toPool) {
            this.tensors = tensors;
            this.pool = pool;
            this.toPool = toPool;
        }

        @Override
        public void piece(int tensor, long tensorOffset, long objectOffset, long length) {
            bytes += length;
            if (toPool) {
                MemorySegment.copy(tensors.tensor(tensor), tensorOffset, pool, objectOffset, length);
            } else {
                MemorySegment.copy(pool, objectOffset, tensors.tensor(tensor), tensorOffset, length);
            }
        }

        @Override
        public void transposed(int tensor, long tensorOffset, long objectOffset, long length, long shape) {
            bytes += length;
            MemorySegment segment = tensors.tensor(tensor);
            long rowBytes = HeadTranspose.rowBytes(shape);
            long rows = length / rowBytes;
            for (long row = 0; row < rows; row++) {
                long inTensor = tensorOffset + HeadTranspose.tensorRowOffset(shape, row);
                long inObject = objectOffset + row * rowBytes;
                if (toPool) {
                    MemorySegment.copy(segment, inTensor, pool, inObject, rowBytes);
                } else {
                    MemorySegment.copy(pool, inObject, segment, inTensor, rowBytes);
                }
            }
        }
    }
}
