package io.lmcache.server.module;

import io.lmcache.server.cuda.CopyEngine;
import io.lmcache.server.cuda.CudaException;
import io.lmcache.server.cuda.Direction;
import io.lmcache.server.cuda.GpuBackend;
import io.lmcache.server.cuda.Pieces;
import io.lmcache.server.liveness.InstanceLivenessTarget;
import io.lmcache.server.liveness.Liveness;
import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.loop.PeerId;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.TensorWrapper;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.transfer.ChunkHashes;
import io.lmcache.server.transfer.ChunkRange;
import io.lmcache.server.transfer.DeviceKvTensors;
import io.lmcache.server.transfer.HostKvTensors;
import io.lmcache.server.transfer.InstanceContext;
import io.lmcache.server.transfer.KvLayout;
import io.lmcache.server.transfer.KvTensors;
import io.lmcache.server.transfer.LayoutDetector;
import io.lmcache.server.transfer.LayoutException;
import io.lmcache.server.transfer.PiecePlanner;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * LMCache-driven transfers: workers register their KV tensors, and the server itself copies the
 * blocks of each chunk between those tensors and pool objects (STORE: into the pool; RETRIEVE: out
 * of it, into other blocks). CPU workers share their tensors as POSIX shared memory and the copy
 * is done before the reply, whose event handle is then 64 zero bytes.
 */
public final class LmcacheDrivenTransferModule implements InstanceLivenessTarget {
    private static final Logger LOG = LoggerFactory.getLogger(LmcacheDrivenTransferModule.class);
    private static final String FAILURES = "lmcache_mp.transfer_failures";
    private static final String FAILURES_HELP = "STORE/RETRIEVE answered with false, by reason";
    private static final byte[] NO_EVENT = new byte[64];
    private static final Reply DONE = new Reply.Transfer(NO_EVENT, true);

    private final int chunkSize;
    private final ObjectStore store;
    private final MemorySegment pool;
    private final LookupLeases leases;
    private final ServerMetrics metrics;
    private final Liveness liveness;
    /** Null without CUDA: then only CPU (shared-memory) workers are served. */
    private final GpuBackend gpu;
    private static final ThreadLocal<Pieces> PIECES = ThreadLocal.withInitial(Pieces::new);
    /** The leaf lock: guards the maps and the liveness entries, never held across mapping, copies or calls out. */
    private final Object lock = new Object();
    private final Map<Long, InstanceContext> instances = new HashMap<>();
    /**
     * Registrations that were refused, by instance id: why (for the log of its transfers) and the
     * GPU it named (so failure replies carry an event on that GPU). Oldest first and bounded, so a
     * flood of failing registrations cannot grow it without end.
     */
    private final Map<Long, FailedRegistration> failedRegistrations = new java.util.LinkedHashMap<>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, FailedRegistration> eldest) {
            return size() > MAX_FAILED_REGISTRATIONS;
        }
    };
    private static final int MAX_FAILED_REGISTRATIONS = 4096;

    private record FailedRegistration(String reason, String deviceUuid) {}

    /** Reaped and not yet released (the reaper calls {@link #dropInstanceState} for each). */
    private final Map<Long, InstanceContext> reaped = new HashMap<>();

    public LmcacheDrivenTransferModule(int chunkSize, ObjectStore store, MemorySegment pool, LookupLeases leases, ServerMetrics metrics,
            Liveness liveness, GpuBackend gpu) {
        this.chunkSize = chunkSize;
        this.store = store;
        this.pool = pool;
        this.leases = leases;
        this.metrics = metrics;
        this.liveness = liveness;
        this.gpu = gpu;
        for (String op : new String[] {"store", "retrieve"}) {
            for (String reason : new String[] {"unknown_instance", "registration_failed", "bad_range", "bad_worker_id", "bad_block_ids",
                "tensors_gone", "copy_failed", "no_memory", "not_found", "bad_skip"}) {
                metrics.declare(FAILURES, FAILURES_HELP, "op", op, "reason", reason);
            }
        }
    }

    // --- registration --------------------------------------------------------------------------

    public Reply register(Request.RegisterKvCache request, PeerId peer) {
        long id = request.instanceId();
        synchronized (lock) {
            InstanceContext existing = instances.get(id);
            if (existing != null && existing.wrappers().equals(request.kvCaches()) && existing.worldSize() == request.worldSize()
                    && existing.modelName().equals(request.modelName())) {
                liveness.traffic(existing.liveness(), peer);
                LOG.debug("instance {} registered again with the same tensors: kept", id);
                return Reply.NONE;
            }
        }
        InstanceContext context;
        try {
            context = createContext(request, peer);
        } catch (LayoutException e) {
            LOG.error("REGISTER of instance {} (model {}) from peer {} failed: {}; its STORE/RETRIEVE will answer false", id,
                    request.modelName(), peer, e.getMessage());
            metrics.increment("lmcache_mp.registration_failures", "registrations refused (layout, mapping)");
            InstanceContext replaced;
            synchronized (lock) {
                failedRegistrations.put(id, new FailedRegistration(e.getMessage(),
                        request.kvCaches().isEmpty() ? null : request.kvCaches().getFirst().deviceUuid()));
                replaced = instances.remove(id);
            }
            if (replaced != null) {
                replaced.close();
            }
            return Reply.NONE;
        }
        InstanceContext replaced;
        synchronized (lock) {
            replaced = instances.put(id, context);
            failedRegistrations.remove(id);
        }
        if (replaced != null) {
            LOG.info("instance {} re-registered with different tensors: replaced", id);
            replaced.close();
        }
        LOG.info("registered instance {} from peer {}: model {}, world size {}, {}", id, peer, request.modelName(),
                request.worldSize(), context.layout().describe());
        return Reply.NONE;
    }

    private InstanceContext createContext(Request.RegisterKvCache request, PeerId peer) throws LayoutException {
        KvLayout layout = LayoutDetector.detect(request.kvCaches(), request.layoutHints(), request.engineGroups(), chunkSize);
        long objectBytes = layout.objectBytes(chunkSize);
        if (objectBytes > store.maxObjectBytes()) {
            throw new LayoutException("a chunk object of this layout takes " + (objectBytes >> 20) + " MiB, more than an L1 region ("
                    + (store.maxObjectBytes() >> 20) + " MiB): raise --l1-region-size-mb or lower --chunk-size");
        }
        if (request.worldSize() < 1) {
            throw new LayoutException("world_size must be at least 1, got " + request.worldSize());
        }
        KvTensors tensors = mapTensors(request.kvCaches());
        return new InstanceContext(request.instanceId(), request.modelName(), request.worldSize(), layout, tensors, request.kvCaches(), peer,
                liveness.newEntry(peer));
    }

    private KvTensors mapTensors(List<TensorWrapper> wrappers) throws LayoutException {
        List<TensorWrapper.CpuShm> shm = new ArrayList<>();
        for (TensorWrapper wrapper : wrappers) {
            if (wrapper instanceof TensorWrapper.CpuShm cpu) {
                shm.add(cpu);
            }
        }
        if (shm.size() == wrappers.size()) {
            return HostKvTensors.map(shm);
        }
        if (!shm.isEmpty()) {
            throw new LayoutException("a registration mixes CPU shared-memory and CUDA tensors");
        }
        if (gpu == null) {
            throw new LayoutException("CUDA IPC tensors need the CUDA path, which this server is not running (no CUDA driver or GPU found,"
                    + " or --device host)");
        }
        try {
            io.lmcache.server.cuda.DeviceTensors tensors = gpu.open(wrappers);
            try {
                // the device's copy engine (kernel module, streams, 128 MiB of staging) is made now,
                // so the first transfer does not pay for it and a GPU too full for it fails here
                gpu.engine(tensors.device());
            } catch (CudaException e) {
                tensors.close();
                throw e;
            }
            return new DeviceKvTensors(tensors);
        } catch (CudaException e) {
            throw new LayoutException(e.getMessage());
        }
    }

    public Reply unregister(Request.UnregisterKvCache request) {
        InstanceContext removed;
        synchronized (lock) {
            removed = instances.remove(request.instanceId());
            failedRegistrations.remove(request.instanceId());
        }
        if (removed == null) {
            LOG.warn("UNREGISTER of unknown instance {}", request.instanceId());
        } else {
            removed.close();
            LOG.info("unregistered instance {}", request.instanceId());
        }
        return Reply.NONE;
    }

    // --- transfers -----------------------------------------------------------------------------

    public Reply store(Request.Store request, PeerId peer) {
        InstanceContext context = acquire(request.instanceId(), peer, "store");
        if (context == null) {
            return failure(request.instanceId(), Direction.TO_POOL);
        }
        // a GPU transfer outlives this call: its completion gives the context back, not this method
        boolean releaseHere = true;
        try {
            Plan plan = plan(context, request.key(), request.blockIds(), "store");
            if (plan == null) {
                return failure(context, Direction.TO_POOL);
            }
            KvLayout layout = context.layout();
            long objectBytes = layout.objectBytes(chunkSize);
            CacheKey key = request.key();
            StoredObject[] reserved = new StoredObject[plan.range.count()];
            boolean outOfMemory = false;
            for (int j = 0; j < reserved.length; j++) {
                int chunk = plan.range.firstChunk() + j;
                StoredObject object = store.reserve(key.modelName(), key.cacheSalt(), key.workerId(), 0, plan.hashes[2 * chunk],
                        plan.hashes[2 * chunk + 1], objectBytes, layout.format());
                if (object == ObjectStore.NO_MEMORY) {
                    // a later chunk without this one could never be a prefix hit: stop here
                    outOfMemory = true;
                    break;
                }
                reserved[j] = object == ObjectStore.EXISTS ? null : object;
            }
            if (outOfMemory) {
                ObjectStore.Snapshot pool = store.snapshot();
                fail("store", "no_memory", "STORE for instance " + request.instanceId() + ": no room in L1 for a " + (objectBytes >> 10)
                        + " KiB chunk (" + (pool.usedBytes() >> 20) + " of " + (pool.readyBytes() >> 20) + " MiB ready in use, "
                        + (pool.objects() - pool.evictable()) + " object(s) locked or being written); storing what fit");
            }
            if (context.tensors() instanceof DeviceKvTensors device) {
                releaseHere = false;
                return storeOnGpu(context, device, plan, reserved, request, !outOfMemory);
            }
            HostCopy copy = new HostCopy((HostKvTensors) context.tensors(), pool, true);
            long startNs = System.nanoTime();
            try {
                for (int j = 0; j < reserved.length; j++) {
                    if (reserved[j] != null) {
                        PiecePlanner.chunk(layout, plan.blocks, j * plan.blocksPerChunk, plan.blocksPerChunk, 0, reserved[j].offset(), copy);
                    }
                }
                metrics.stored(copy.bytes, System.nanoTime() - startNs);
            } catch (RuntimeException | InternalError e) {
                abortAll(reserved);
                fail("store", "copy_failed", "STORE for instance " + request.instanceId() + " failed while copying: " + e);
                return FailureReplies.transferFailed();
            }
            commitAll(reserved);
            return outOfMemory ? FailureReplies.transferFailed() : DONE;
        } finally {
            if (releaseHere) {
                context.release();
            }
        }
    }

    /** Enqueues the copies; the reply carries our event, and the objects are published when it fires. */
    private Reply storeOnGpu(InstanceContext context, DeviceKvTensors device, Plan plan, StoredObject[] reserved, Request.Store request,
            boolean allFit) {
        KvLayout layout = context.layout();
        Pieces pieces = PIECES.get();
        pieces.clear();
        for (int j = 0; j < reserved.length; j++) {
            if (reserved[j] != null) {
                PiecePlanner.chunk(layout, plan.blocks, j * plan.blocksPerChunk, plan.blocksPerChunk, 0, reserved[j].offset(), pieces::add);
            }
        }
        long bytes = pieces.totalBytes();
        long startNs = System.nanoTime();
        try {
            CopyEngine engine = gpu.engine(device.tensors().device());
            if (pieces.count() == 0) {
                context.release();
                return new Reply.Transfer(engine.recordedEvent(Direction.TO_POOL), allFit);
            }
            CopyEngine.Submitted submitted = engine.submit(Direction.TO_POOL, device.tensors(), pieces, request.eventHandle(), (ok, error) -> {
                if (ok) {
                    commitAll(reserved);
                    metrics.stored(bytes, System.nanoTime() - startNs);
                } else {
                    abortAll(reserved);
                    fail("store", "copy_failed", "STORE for instance " + request.instanceId() + " failed on the GPU: " + error);
                }
                context.release();
            });
            if (!submitted.accepted()) {
                fail("store", "copy_failed", "STORE for instance " + request.instanceId() + " could not be enqueued: " + submitted.error());
            }
            return new Reply.Transfer(submitted.eventHandle(), submitted.accepted() && allFit);
        } catch (CudaException e) {
            abortAll(reserved);
            context.release();
            fail("store", "copy_failed", "STORE for instance " + request.instanceId() + ": " + e.getMessage());
            return FailureReplies.transferFailed();
        }
    }

    public Reply retrieve(Request.Retrieve request, PeerId peer) {
        InstanceContext context = acquire(request.instanceId(), peer, "retrieve");
        CacheKey key = request.key();
        if (context == null) {
            return failure(request.instanceId(), Direction.FROM_POOL);
        }
        boolean releaseHere = true;
        ChunkRange range = null;
        try {
            Plan plan = plan(context, key, request.blockIds(), "retrieve");
            if (plan == null) {
                return failure(context, Direction.FROM_POOL);
            }
            range = plan.range;
            if (request.skipFirstNTokens() < 0) {
                fail("retrieve", "bad_skip", "RETRIEVE with skip_first_n_tokens " + request.skipFirstNTokens());
                return failure(context, Direction.FROM_POOL);
            }
            KvLayout layout = context.layout();
            long objectBytes = layout.objectBytes(chunkSize);
            StoredObject[] pinned = new StoredObject[range.count()];
            for (int j = 0; j < pinned.length; j++) {
                int chunk = range.firstChunk() + j;
                pinned[j] = store.pinReady(key.modelName(), key.cacheSalt(), key.workerId(), 0, plan.hashes[2 * chunk],
                        plan.hashes[2 * chunk + 1], layout.format(), objectBytes);
                if (pinned[j] == null) {
                    unpinAll(pinned, false);
                    fail("retrieve", "not_found", null);
                    metrics.increment("lmcache_mp.l1_read_failure", "reads of chunks that were not in L1", "during", "l1_retrieve",
                            "reason", "not_found");
                    return failure(context, Direction.FROM_POOL);
                }
            }
            if (context.tensors() instanceof DeviceKvTensors device) {
                releaseHere = false;
                return retrieveOnGpu(context, device, plan, pinned, request);
            }
            HostCopy copy = new HostCopy((HostKvTensors) context.tensors(), pool, false);
            long startNs = System.nanoTime();
            try {
                for (int j = 0; j < pinned.length; j++) {
                    int skipInChunk = Math.max(0, request.skipFirstNTokens() - j * chunkSize);
                    PiecePlanner.chunk(layout, plan.blocks, j * plan.blocksPerChunk, plan.blocksPerChunk, skipInChunk, pinned[j].offset(), copy);
                }
                metrics.retrieved(copy.bytes, System.nanoTime() - startNs);
            } catch (RuntimeException | InternalError e) {
                unpinAll(pinned, false);
                fail("retrieve", "copy_failed", "RETRIEVE for instance " + request.instanceId() + " failed while copying: " + e);
                return FailureReplies.transferFailed();
            }
            unpinAll(pinned, true);
            return DONE;
        } finally {
            if (releaseHere) {
                context.release();
            }
            if (range != null) {
                // this worker's share of the lookup's read locks, also when the retrieve failed
                leases.releaseRetrieved(key.requestId(), key.workerId(), range.firstChunk(), range.endChunk());
            }
        }
    }

    /** Enqueues the copies into the worker's blocks; the objects stay pinned until our event fires. */
    private Reply retrieveOnGpu(InstanceContext context, DeviceKvTensors device, Plan plan, StoredObject[] pinned, Request.Retrieve request) {
        KvLayout layout = context.layout();
        Pieces pieces = PIECES.get();
        pieces.clear();
        for (int j = 0; j < pinned.length; j++) {
            int skipInChunk = Math.max(0, request.skipFirstNTokens() - j * chunkSize);
            PiecePlanner.chunk(layout, plan.blocks, j * plan.blocksPerChunk, plan.blocksPerChunk, skipInChunk, pinned[j].offset(), pieces::add);
        }
        long bytes = pieces.totalBytes();
        long startNs = System.nanoTime();
        try {
            CopyEngine.Submitted submitted = gpu.engine(device.tensors().device()).submit(Direction.FROM_POOL, device.tensors(), pieces,
                    request.eventHandle(), (ok, error) -> {
                        unpinAll(pinned, ok);
                        if (ok) {
                            metrics.retrieved(bytes, System.nanoTime() - startNs);
                        } else {
                            fail("retrieve", "copy_failed", "RETRIEVE for instance " + request.instanceId() + " failed on the GPU: " + error);
                        }
                        context.release();
                    });
            if (!submitted.accepted()) {
                fail("retrieve", "copy_failed", "RETRIEVE for instance " + request.instanceId() + " could not be enqueued: " + submitted.error());
            }
            return new Reply.Transfer(submitted.eventHandle(), submitted.accepted());
        } catch (CudaException e) {
            unpinAll(pinned, false);
            context.release();
            fail("retrieve", "copy_failed", "RETRIEVE for instance " + request.instanceId() + ": " + e.getMessage());
            return FailureReplies.transferFailed();
        }
    }

    /** The failure reply for a known instance: on a GPU worker a valid, recorded event (the client imports it). */
    private Reply failure(InstanceContext context, Direction direction) {
        if (gpu != null && context.tensors() instanceof DeviceKvTensors device) {
            try {
                return new Reply.Transfer(gpu.engine(device.tensors().device()).recordedEvent(direction), false);
            } catch (CudaException e) {
                LOG.error("cannot record a failure event for instance {}: {}", context.instanceId(), e.getMessage());
            }
        }
        return FailureReplies.transferFailed();
    }

    /** The failure reply for an instance we do not know: with a GPU, an event on the GPU its registration named, or the first. */
    private Reply failure(long instanceId, Direction direction) {
        if (gpu == null) {
            return FailureReplies.transferFailed();
        }
        String uuid;
        synchronized (lock) {
            FailedRegistration failed = failedRegistrations.get(instanceId);
            uuid = failed == null ? null : failed.deviceUuid();
        }
        try {
            return new Reply.Transfer(gpu.engineFor(uuid).recordedEvent(direction), false);
        } catch (CudaException e) {
            LOG.error("cannot record a failure event for unknown instance {}: {}", instanceId, e.getMessage());
            return FailureReplies.transferFailed();
        }
    }

    /** Publishes reserved objects, last chunk first, so the head of the prefix is the most recently used. */
    private void commitAll(StoredObject[] reserved) {
        for (int j = reserved.length - 1; j >= 0; j--) {
            if (reserved[j] != null) {
                store.commit(reserved[j]);
            }
        }
    }

    /** The validated shape of one transfer: its chunks, their hashes, and the block ids to use. */
    private record Plan(ChunkRange range, long[] hashes, int[] blocks, int blocksPerChunk) {}

    private Plan plan(InstanceContext context, CacheKey key, int[][] blockIds, String op) {
        String[] why = new String[1];
        ChunkRange range = ChunkRange.of(key, chunkSize, why);
        if (range == null) {
            fail(op, "bad_range", op.toUpperCase() + " for instance " + context.instanceId() + ": " + why[0]);
            return null;
        }
        if (!key.hasWorker() || key.workerId() >= Math.max(key.worldSize(), 1)) {
            fail(op, "bad_worker_id", op.toUpperCase() + " for instance " + context.instanceId() + ": worker_id " + key.workerId()
                    + " is not a kv rank of world size " + key.worldSize());
            return null;
        }
        if (blockIds.length != 1) {
            fail(op, "bad_block_ids", op.toUpperCase() + " for instance " + context.instanceId() + ": " + blockIds.length
                    + " KV-cache groups of block ids; this server serves one");
            return null;
        }
        KvLayout layout = context.layout();
        int blocksPerChunk = layout.blocksPerChunk(chunkSize);
        int[] blocks = blockIds[0];
        long needed = (long) range.count() * blocksPerChunk;
        if (blocks.length < needed) {
            fail(op, "bad_block_ids", op.toUpperCase() + " for instance " + context.instanceId() + ": " + blocks.length
                    + " block ids for " + range.count() + " chunk(s) of " + blocksPerChunk + " blocks");
            return null;
        }
        for (int i = 0; i < needed; i++) {
            if (blocks[i] < 0 || blocks[i] >= layout.numBlocks()) {
                fail(op, "bad_block_ids", op.toUpperCase() + " for instance " + context.instanceId() + ": block id " + blocks[i]
                        + " is outside 0.." + (layout.numBlocks() - 1));
                return null;
            }
        }
        String dead = context.tensors().checkAlive();
        if (dead != null) {
            fail(op, "tensors_gone", op.toUpperCase() + " for instance " + context.instanceId() + ": " + dead);
            return null;
        }
        return new Plan(range, ChunkHashes.of(key, chunkSize, range.endChunk()), blocks, blocksPerChunk);
    }

    private InstanceContext acquire(long instanceId, PeerId peer, String op) {
        InstanceContext context;
        String failure;
        synchronized (lock) {
            context = instances.get(instanceId);
            FailedRegistration failed = failedRegistrations.get(instanceId);
            failure = failed == null ? null : failed.reason();
            if (context != null) {
                liveness.traffic(context.liveness(), peer);
            }
        }
        if (context != null && context.acquire()) {
            return context;
        }
        fail(op, failure != null ? "registration_failed" : "unknown_instance", op.toUpperCase() + " for instance " + instanceId
                + (failure != null ? " whose registration failed: " + failure : " that is not registered"));
        return null;
    }

    private void abortAll(StoredObject[] reserved) {
        for (StoredObject object : reserved) {
            if (object != null) {
                store.abort(object);
            }
        }
    }

    private void unpinAll(StoredObject[] pinned, boolean read) {
        for (int j = pinned.length - 1; j >= 0; j--) {
            if (pinned[j] != null) {
                store.unpin(pinned[j], read);
            }
        }
    }

    private void fail(String op, String reason, String message) {
        metrics.increment(FAILURES, FAILURES_HELP, "op", op, "reason", reason);
        if (message != null) {
            LOG.warn("{}; answering false", message);
        }
    }

    public int registeredInstances() {
        synchronized (lock) {
            return instances.size();
        }
    }

    /** LMCache's {@code registered_gpu_ids} and {@code cache_context_meta} status entries. */
    public void status(Map<String, Object> status, io.lmcache.server.liveness.PeerConnections connections) {
        List<InstanceContext> all;
        synchronized (lock) {
            all = new ArrayList<>(instances.values());
        }
        List<Long> ids = new ArrayList<>();
        Map<String, Object> meta = new java.util.LinkedHashMap<>();
        for (InstanceContext context : all) {
            ids.add(context.instanceId());
            KvLayout layout = context.layout();
            Map<String, Object> group = new java.util.LinkedHashMap<>();
            group.put("kernel_group_idx", 0);
            group.put("engine_group_idx", 0);
            group.put("object_group_idx", 0);
            group.put("num_layers", layout.numLayers());
            group.put("layer_indices", java.util.stream.IntStream.range(0, layout.numLayers()).boxed().toList());
            group.put("tokens_per_block", layout.blockSize());
            group.put("slots_per_block", layout.blockSize());
            group.put("dtype", "torch." + context.wrappers().getFirst().dtype().torchName());
            group.put("engine_kv_concrete_shape", java.util.Arrays.toString(context.wrappers().getFirst().shape()));
            group.put("is_mla", layout.kind() == KvLayout.Kind.MLA);
            group.put("engine_kv_format", layout.kind().name() + (layout.hnd() ? "_HND" : "_NHD"));
            group.put("engine_kv_shape", layout.kind().description());
            group.put("attention_backend", layout.kind().name());
            Map<String, Object> kvLayout = new java.util.LinkedHashMap<>();
            kvLayout.put("num_layers", layout.numLayers());
            kvLayout.put("num_blocks", layout.numBlocks());
            kvLayout.put("cache_size_per_token", layout.bytesPerToken());
            kvLayout.put("kernel_groups", List.of(group));
            Map<String, Object> entry = new java.util.LinkedHashMap<>();
            entry.put("model_name", context.modelName());
            entry.put("world_size", context.worldSize());
            entry.put("kv_cache_layout", kvLayout);
            long closed;
            synchronized (lock) {
                closed = connections.closedSinceNs(context.liveness().peer());
            }
            entry.put("connection_closed", closed >= 0);
            meta.put(Long.toString(context.instanceId()), entry);
        }
        status.put("registered_gpu_ids", ids);
        status.put("cache_context_meta", meta);
    }

    // --- liveness ---------------------------------------------------------------------------

    @Override
    public String livenessName() {
        return "lmcache_driven_transfer";
    }

    @Override
    public void touchInstance(long instanceId, PeerId peer) {
        synchronized (lock) {
            InstanceContext context = instances.get(instanceId);
            if (context != null) {
                liveness.ping(context.liveness(), peer);
            }
        }
    }

    @Override
    public List<Reaped> reapStaleInstances(long timeoutNs, long graceNs) {
        synchronized (lock) {
            return liveness.reapStale(instances, reaped, InstanceContext::liveness, timeoutNs, graceNs);
        }
    }

    @Override
    public int trackedInstanceCount() {
        synchronized (lock) {
            return instances.size();
        }
    }

    /** The same release as UNREGISTER: the mappings go (now, or when the transfers in flight finish). */
    @Override
    public void dropInstanceState(long instanceId) {
        InstanceContext context;
        synchronized (lock) {
            context = reaped.remove(instanceId);
            failedRegistrations.remove(instanceId);
        }
        if (context != null) {
            context.close();
        }
    }

    /** Unmaps every registered instance (shutdown). */
    public void close() {
        List<InstanceContext> all;
        synchronized (lock) {
            all = new ArrayList<>(instances.values());
            all.addAll(reaped.values());
            instances.clear();
            reaped.clear();
        }
        all.forEach(InstanceContext::close);
    }

    /** Copies pieces between a worker's shared-memory tensors and the pool, in the direction given. */
    private static final class HostCopy implements io.lmcache.server.transfer.PieceSink {
        private final HostKvTensors tensors;
        private final MemorySegment pool;
        private final boolean toPool;
        long bytes;

        HostCopy(HostKvTensors tensors, MemorySegment pool, boolean toPool) {
            this.tensors = Objects.requireNonNull(tensors);
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
    }
}
