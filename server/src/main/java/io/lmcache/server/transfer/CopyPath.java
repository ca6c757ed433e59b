package io.lmcache.server.transfer;

import io.lmcache.server.cuda.CudaException;
import io.lmcache.server.cuda.DeviceTensors;
import io.lmcache.server.cuda.Direction;
import io.lmcache.server.cuda.GpuBackend;
import io.lmcache.server.liveness.EndOfLifeQueue;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.TensorWrapper;
import java.util.ArrayList;
import java.util.List;

/**
 * How one registered instance's bytes move: chosen once at REGISTER from its tensor wrappers and
 * held by its {@link InstanceContext}, so no transfer asks what kind of tensors it has. Host
 * (shared memory, copied before the reply) or CUDA (IPC mappings, copied by the GPU after it).
 */
public sealed interface CopyPath permits HostCopyPath, CudaCopyPath, DelayedCopyPath {

    /** Emits the pieces of one transfer (the module plans them from the transfer plan and its objects). */
    @FunctionalInterface
    interface PieceSource {
        void emit(PieceSink sink);
    }

    /**
     * Runs exactly once per {@link #copy}: inline on the host path, on the event thread on the CUDA path. {@code finishedNs}
     * ({@link System#nanoTime()}): when the copy ended (on CUDA, when the GPU reached the transfer's end), so the caller can
     * tell how long its commit followed the copy.
     */
    @FunctionalInterface
    interface Completion {
        void done(boolean ok, long bytes, String error, long finishedNs);
    }

    /**
     * The event handle for the reply and whether the copy was accepted; {@code enqueueError} says
     * why the GPU refused it (the completion then still runs, with {@code false}).
     */
    record Copied(byte[] eventHandle, boolean accepted, String enqueueError) {}

    /**
     * Copies between the instance's tensors and the pool. The lease passes to the copy: on the
     * CUDA path the copy's completion returns it (the caller's close becomes a no-op).
     */
    Copied copy(Direction direction, PieceSource pieces, byte[] clientEvent, InstanceContext.Lease lease, Completion done);

    /** A layer-wise RETRIEVE's pieces: each layer batch's, then {@code batchEnd}, which records the batch's pool event. */
    @FunctionalInterface
    interface LayeredSource {
        void emit(PieceSink sink, LayerMarks batchEnd);
    }

    /** Ends a layer batch: records pool event {@code poolIndex} after every piece emitted so far. */
    @FunctionalInterface
    interface LayerMarks {
        void batchEnd(int poolIndex);
    }

    /**
     * This registration's layer-wise event pool (made on first use and kept until {@link #close}), its exported handles in
     * pool order; null where the path has no device events: LMCache gives a CPU worker no event backend, so its
     * {@code _ensure_event_pool} answers no pool ({@code lmcache_driven_transfer_layerwise.py@1565d9a3}).
     */
    default List<byte[]> layerEventHandles() {
        return null;
    }

    /**
     * A layer-wise RETRIEVE: as {@link #copy} from the pool, with each batch's pool event recorded where {@code source} ends it.
     * Only a path with {@link #layerEventHandles} serves it.
     */
    default Copied copyLayerwise(LayeredSource source, byte[] clientEvent, InstanceContext.Lease lease, Completion done) {
        throw new UnsupportedOperationException("no layer-wise events on the " + kind() + " path");
    }

    /**
     * Called as a handler starts a transfer, before it plans, with the length of its first piece (see
     * {@link PiecePlanner#firstPieceBytes}), the worker's event handle and the chunks it spans: lets the path get its device
     * ready (on CUDA, the GPU's switch to this process's context when the first copy needs a kernel, and the open of the
     * worker's event for a long transfer; nothing on the host path). Never throws.
     */
    void warm(Direction direction, long firstPieceBytes, byte[] clientEvent, int chunks);

    /** The reply to a transfer refused before any copy: on CUDA a valid recorded event on the instance's GPU. */
    Reply failure(Direction direction);

    /** Null when the mappings still reach the worker's memory, else why not. */
    String checkAlive();

    /** Unmaps (shm) or closes the IPC mappings; called once, by the release thread only. */
    void close() throws Exception;

    /** A short name for logs and /status: "host" or "cuda". */
    String kind();

    /** The device LMCache's transfer metrics name: "cuda:N" (this process's device ordinal) or "cpu". */
    String device();

    /**
     * Whether a worker's STORE or RETRIEVE has copied through this path yet: the GPU warm-up started by its REGISTER yields
     * once it has (issue 52), so a real transfer never queues behind scratch rounds for more than the one in hand.
     */
    boolean copied();

    /**
     * Loads and initializes every kind of path before the JIT warm-up compiles the request path (issue 52). With the host path
     * the only one loaded, the JIT binds the module's calls on a {@code CopyPath} to it alone, and throws that code away when a
     * first GPU worker's REGISTER loads {@link CudaCopyPath}: a fresh server's STOREs and RETRIEVEs then ran interpreted.
     */
    static void loadAll() {
        for (Class<?> path : CopyPath.class.getPermittedSubclasses()) {
            try {
                Class.forName(path.getName(), true, path.getClassLoader());
            } catch (ClassNotFoundException e) {
                throw new IllegalStateException("a copy path's class cannot be loaded: " + path.getName(), e);
            }
        }
    }

    /**
     * Maps the registration's tensors and picks the path; throws when they cannot be served, after
     * handing whatever CUDA mappings it opened to {@code paths}' end-of-life queue (never closed on this thread).
     * Shared-memory tensors are opened by its shm rules and copied by its host copy threads; its test delay (null but with
     * {@code --test-hooks}) wraps their path in the GPU path's test double.
     */
    static CopyPath open(List<TensorWrapper> wrappers, CopyPaths paths) throws LayoutException {
        ShmSegments shm = paths.shm();
        GpuBackend gpu = paths.gpu();
        EndOfLifeQueue endOfLife = paths.endOfLife();
        CompletionDelay testDelay = paths.testDelay();
        List<TensorWrapper.CpuShm> cpu = new ArrayList<>();
        for (TensorWrapper wrapper : wrappers) {
            switch (wrapper) {
                case TensorWrapper.CpuShm tensor -> cpu.add(tensor);
                case TensorWrapper.CudaIpc ipc -> { }
                case TensorWrapper.RawCudaIpc raw -> { }
                case TensorWrapper.VmmCudaIpc vmm -> { }
                case TensorWrapper.Unsupported unsupported -> { }
            }
        }
        if (cpu.size() == wrappers.size()) {
            HostCopyPath host = new HostCopyPath(HostKvTensors.map(cpu, shm), paths.pool(), paths.hostCopies());
            return testDelay == null ? host : new DelayedCopyPath(host, testDelay);
        }
        if (!cpu.isEmpty()) {
            throw new LayoutException("a registration mixes CPU shared-memory and CUDA tensors");
        }
        try {
            DeviceTensors tensors = gpu.open(wrappers, release -> endOfLife.enqueue("a refused registration's mappings", release::run));
            try {
                // the device's copy engine (kernel module, streams, 128 MiB of staging) is made now,
                // so the first transfer does not pay for it and a GPU too full for it fails here
                return new CudaCopyPath(tensors, gpu.engine(tensors.device()));
            } catch (CudaException e) {
                endOfLife.enqueue("a refused registration's mappings", tensors::close);
                throw e;
            }
        } catch (CudaException e) {
            throw new LayoutException(e.getMessage());
        }
    }
}
