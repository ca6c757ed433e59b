package io.lmcache.server.transfer;

import io.lmcache.server.cuda.Direction;
import io.lmcache.server.protocol.Reply;

/**
 * The test double of the GPU path ({@code --test-hooks}): a host path whose completions come after the reply, as a CUDA
 * copy's do (see {@link CompletionDelay}). With no delay set it is the host path unchanged.
 */
final class DelayedCopyPath implements CopyPath {
    private final HostCopyPath host;
    private final CompletionDelay delay;

    DelayedCopyPath(HostCopyPath host, CompletionDelay delay) {
        this.host = host;
        this.delay = delay;
    }

    @Override
    public Copied copy(Direction direction, PieceSource pieces, byte[] clientEvent, InstanceContext.Lease lease, Completion done) {
        long delayNs = delay.delayNs();
        if (delayNs == 0) {
            return host.copy(direction, pieces, clientEvent, lease, done);
        }
        boolean fail = direction == Direction.TO_POOL && delay.failThisStore();
        // the bytes move now, on this thread; only the completion waits (it touches no mapping, so the lease may end first)
        return host.copy(direction, pieces, clientEvent, lease, (ok, bytes, error, copiedNs) ->
                // runs on: lmcache-test-completions; the delayed moment stands for the GPU copy's end
                delay.later(delayNs, () -> done.done(ok && !fail, bytes, fail ? "failed on purpose (test hook)" : error, System.nanoTime())));
    }

    @Override
    public void warm(Direction direction, long firstPieceBytes, byte[] clientEvent, int chunks) {
        host.warm(direction, firstPieceBytes, clientEvent, chunks);
    }

    @Override
    public Reply failure(Direction direction) {
        return host.failure(direction);
    }

    @Override
    public String checkAlive() {
        return host.checkAlive();
    }

    @Override
    public void close() {
        host.close();
    }

    @Override
    public String kind() {
        return host.kind();
    }

    @Override
    public boolean copied() {
        return host.copied();
    }

    @Override
    public String device() {
        return host.device();
    }
}
