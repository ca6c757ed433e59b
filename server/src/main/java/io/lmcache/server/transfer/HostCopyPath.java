package io.lmcache.server.transfer;

import io.lmcache.server.cuda.Direction;
import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.protocol.Reply;
import java.lang.foreign.MemorySegment;

/**
 * A CPU worker's path: its POSIX shared-memory tensors, copied before the reply by the calling thread and the server's copy
 * threads ({@link HostCopies}); the reply's event handle is then 64 zero bytes.
 */
public final class HostCopyPath implements CopyPath {
    private static final byte[] NO_EVENT = new byte[64];
    private static final Copied DONE = new Copied(NO_EVENT, true, null);
    private static final Copied FAILED = new Copied(NO_EVENT, false, null);

    private final HostKvTensors tensors;
    private final MemorySegment pool;
    private final HostCopies copies;
    private volatile boolean copied;

    HostCopyPath(HostKvTensors tensors, MemorySegment pool, HostCopies copies) {
        this.tensors = tensors;
        this.pool = pool;
        this.copies = copies;
    }

    @Override
    public Copied copy(Direction direction, PieceSource pieces, byte[] clientEvent, InstanceContext.Lease lease, Completion done) {
        // the pieces first, then the bytes: spread over the copy threads in long runs, all landed before the completion
        if (!copied) {
            copied = true; // once: a volatile read on every later copy
        }
        HostPieces gathered = new HostPieces();
        try {
            pieces.emit(gathered);
            copies.copy(gathered, tensors::tensor, pool, direction == Direction.TO_POOL);
        } catch (RuntimeException | InternalError e) {
            done.done(false, gathered.bytes(), "failed while copying: " + e, System.nanoTime());
            return FAILED;
        }
        done.done(true, gathered.bytes(), null, System.nanoTime());
        return DONE;
    }

    @Override
    public Reply failure(Direction direction) {
        return FailureReplies.transferFailed();
    }

    @Override
    public void warm(Direction direction, long firstPieceBytes, byte[] clientEvent, int chunks) {
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
    public boolean copied() {
        return copied;
    }

    @Override
    public String device() {
        return "cpu";
    }
}
