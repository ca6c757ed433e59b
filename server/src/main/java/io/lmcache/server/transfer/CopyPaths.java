package io.lmcache.server.transfer;

import io.lmcache.server.cuda.GpuBackend;
import io.lmcache.server.liveness.EndOfLifeQueue;
import io.lmcache.server.protocol.TensorWrapper;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.function.Consumer;

/**
 * What opening a registration's {@link CopyPath} takes: the CPU workers' shared-memory segments ({@code shm}'s rules), the
 * GPU backend (null or {@link GpuBackend#none()}: no CUDA), the pool the host path copies to and from, the queue a refused
 * registration's mappings are closed on, with {@code --test-hooks} the host copies' completion delay (else null), and the
 * copy threads the host path spreads its copies over (null: each copy on its transfer thread alone); {@code afterRegister} runs
 * after each successful REGISTER, before its reply, on its lane, with the new registration (the GPU warm-up's start for the
 * registration's device, {@code warmup.GpuWarmups#afterRegister}, issues 30 and 52): it must return at once and never throw.
 */
public record CopyPaths(ShmSegments shm, GpuBackend gpu, MemorySegment pool, EndOfLifeQueue endOfLife, CompletionDelay testDelay,
        Opener scratch, HostCopies hostCopies, Consumer<InstanceContext> afterRegister) {
    /**
     * Opens the copy path of the GPU warm-up's scratch worker (issue 30) instead of {@link CopyPath#open}: its tensors are
     * memory the server allocated, which no IPC handle names.
     */
    @FunctionalInterface
    public interface Opener {
        CopyPath open(List<TensorWrapper> wrappers) throws LayoutException;
    }

    public CopyPaths {
        gpu = gpu == null ? GpuBackend.none() : gpu; // a CUDA registration is then refused with the host-only backend's reason
        afterRegister = afterRegister == null ? path -> { } : afterRegister;
        hostCopies = hostCopies == null ? INLINE : hostCopies;
    }

    /** Starts no thread: its copies run on their transfer thread. */
    private static final HostCopies INLINE = HostCopies.inline();

    /** Every real server's: paths opened from the tensors, host copies spread over {@code hostCopies}, {@code afterRegister}. */
    public CopyPaths(ShmSegments shm, GpuBackend gpu, MemorySegment pool, EndOfLifeQueue endOfLife, CompletionDelay testDelay,
            HostCopies hostCopies, Consumer<InstanceContext> afterRegister) {
        this(shm, gpu, pool, endOfLife, testDelay, null, hostCopies, afterRegister);
    }

    /** The warm-up's scratch server: its paths come from {@code scratch}; each copy on its transfer thread, nothing after a REGISTER. */
    public CopyPaths(ShmSegments shm, GpuBackend gpu, MemorySegment pool, EndOfLifeQueue endOfLife, CompletionDelay testDelay,
            Opener scratch) {
        this(shm, gpu, pool, endOfLife, testDelay, scratch, null, null);
    }

    /** As a real server's, each host copy on its transfer thread, nothing after a REGISTER (tests). */
    public CopyPaths(ShmSegments shm, GpuBackend gpu, MemorySegment pool, EndOfLifeQueue endOfLife, CompletionDelay testDelay) {
        this(shm, gpu, pool, endOfLife, testDelay, null, null, null);
    }

    /** Maps the registration's tensors and picks the path (see {@link CopyPath#open}), or the scratch opener's path. */
    public CopyPath open(List<TensorWrapper> wrappers) throws LayoutException {
        return scratch != null ? scratch.open(wrappers) : CopyPath.open(wrappers, this);
    }
}
