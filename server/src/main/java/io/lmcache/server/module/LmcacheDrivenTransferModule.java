package io.lmcache.server.module;

import io.lmcache.server.cuda.CudaException;
import io.lmcache.server.cuda.Direction;
import io.lmcache.server.cuda.GpuBackend;
import io.lmcache.server.liveness.EndOfLifeQueue;
import io.lmcache.server.liveness.InstanceLivenessTarget;
import io.lmcache.server.liveness.InstanceRegistry;
import io.lmcache.server.liveness.Liveness;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.cuda.LayerEvents;
import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.loop.ReplyChannel;
import io.lmcache.server.metrics.L1Catalogue;
import io.lmcache.server.metrics.PhaseTimes;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.metrics.TransferCatalogue;
import io.lmcache.server.metrics.TransferMetrics;
import io.lmcache.server.peer.PeerConnections;
import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.EventHandle;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.transfer.CacheGeometry;
import io.lmcache.server.transfer.ChunkObjects;
import io.lmcache.server.transfer.HandlerPhase;
import io.lmcache.server.transfer.ChunkRange;
import io.lmcache.server.transfer.CopyPath;
import io.lmcache.server.transfer.CopyPaths;
import io.lmcache.server.transfer.GroupPieces;
import io.lmcache.server.transfer.InstanceContext;
import io.lmcache.server.transfer.KernelGroup;
import io.lmcache.server.transfer.LayerBatches;
import io.lmcache.server.transfer.InstanceStatus;
import io.lmcache.server.transfer.LayoutException;
import io.lmcache.server.transfer.NullPages;
import io.lmcache.server.transfer.ObjectGroup;
import io.lmcache.server.transfer.ObjectGroupCatalog;
import io.lmcache.server.transfer.ObjectGroups;
import io.lmcache.server.transfer.ObjectShape;
import io.lmcache.server.transfer.PiecePlanner;
import io.lmcache.server.transfer.PlanResult;
import io.lmcache.server.transfer.RegistrationFailures;
import io.lmcache.server.transfer.ShmSegments;
import io.lmcache.server.transfer.StoreRequest;
import io.lmcache.server.transfer.TransferFailures;
import io.lmcache.server.transfer.TransferPlan;
import io.lmcache.server.transfer.TransferPlanner;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * LMCache-driven transfers: workers register their KV tensors, and the server itself copies the
 * blocks of each chunk between those tensors and pool objects (STORE: into the pool; RETRIEVE: out
 * of it, into other blocks). Each transfer is validated into a {@link TransferPlan} and executed
 * by the instance's {@link CopyPath}, picked once at REGISTER (host shared memory or CUDA IPC).
 */
public final class LmcacheDrivenTransferModule implements InstanceLivenessTarget {
    private static final Logger LOG = LoggerFactory.getLogger(LmcacheDrivenTransferModule.class);
    // a peer can cause each of these once per message: rate-limited, one budget per kind
    private static final RateLimitedLog REGISTER_FAILED = new RateLimitedLog(LOG, "failed REGISTER", 10);
    private static final RateLimitedLog REGISTERED = new RateLimitedLog(LOG, "REGISTER/UNREGISTER", 100);
    private static final RateLimitedLog UNKNOWN_UNREGISTER = new RateLimitedLog(LOG, "UNREGISTER of an unknown instance", 10);
    private static final RateLimitedLog NO_FAILURE_EVENT = new RateLimitedLog(LOG, "failure events not recorded", 10);
    private static final RateLimitedLog LAYERWISE = new RateLimitedLog(LOG, "layer-wise requests", 10);
    /**
     * REGISTER_LAYERWISE_IPC_EVENT_POOL's answer: {@code (0, [])}, what LMCache's server answers when layer-wise mode is off
     * ({@code protocols/layerwise.py@3ed3c8ba}: "The handle list is empty when layer-wise mode is disabled"); the worker then
     * stops at registration with "A server node serves one mode only" ({@code vllm_multi_process_adapter_layerwise.py@8335564e}).
     */
    public static final Reply LAYERWISE_OFF = new Reply.LayerwisePool(0, List.of());
    /**
     * RETRIEVE_LAYERWISE's answer: one closing frame {@code (b"", is_final=True, succeeded=False)}; the worker's layer-wise
     * future then returns from every layer wait and reports a failed retrieve, so vLLM recomputes
     * ({@code futures_layerwise.py@3ed3c8ba}, {@code wait_for_layer}).
     */
    public static final Reply LAYERWISE_MISS = new Reply.LayerwiseFrame(new byte[0], true, false);

    /** {@code --layerwise-batch}: 0 = per-chunk RETRIEVE; N > 0 = layer-wise mode, plain RETRIEVE refused. */
    private final int layerwiseBatch;
    private final int chunkSize;
    private final ObjectStore store;
    private final LookupLeases leases;
    private final ServerMetrics metrics;
    private final GpuBackend gpu;
    private final ShmSegments shmSegments;
    private final EndOfLifeQueue endOfLife;
    private final CopyPaths copyPaths;
    private final TransferPlanner planner;
    private final PhaseTimes<HandlerPhase> times = new PhaseTimes<>(HandlerPhase.class);
    private final ObjectGroupCatalog catalog;
    private final TransferFailures failures;
    private final InstanceRegistry<InstanceContext> instances;
    private final RegistrationFailures failedRegistrations = new RegistrationFailures();
    /** {@code --commit-policy}: each STORE's extent for END_SESSION's window commit; null when off. */
    private final WindowCommit windowCommit;
    /** Test hook ({@code --test-hooks}, {@link #blockNextRegister}): the next REGISTER waits on it. */
    private volatile CountDownLatch blockNextRegister;

    /**
     * What this module tells the lookup side: registrations' object groups to {@code catalog}, each STORE's extent to
     * {@code windowCommit} (null: {@code --commit-policy} off or no L2); and how a hit is read back: {@code layerwiseBatch}
     * ({@code --layerwise-batch}) 0 = per-chunk RETRIEVE, N > 0 = LMCache's layer-wise mode (RETRIEVE_LAYERWISE served, plain
     * RETRIEVE refused).
     */
    public record LookupSide(ObjectGroupCatalog catalog, WindowCommit windowCommit, int layerwiseBatch) {
        /** Per-chunk RETRIEVE (no {@code --layerwise-batch}). */
        public LookupSide(ObjectGroupCatalog catalog, WindowCommit windowCommit) {
            this(catalog, windowCommit, 0);
        }
    }

    /** Without a window commit. */
    public LmcacheDrivenTransferModule(int chunkSize, ObjectStore store, LookupLeases leases, ServerMetrics metrics, Liveness liveness,
            CopyPaths copyPaths, ObjectGroupCatalog catalog) {
        this(chunkSize, store, leases, metrics, liveness, copyPaths, new LookupSide(catalog, null));
    }

    /**
     * A registration's copy path is opened by {@code copyPaths}: its GPU backend may be the host-only one (only CPU,
     * shared-memory workers are served), and its test delay is null but with {@code --test-hooks} (host copies may then
     * complete after their reply, as GPU copies do). Registrations publish their object groups to {@code catalog}, for LOOKUP.
     */
    public LmcacheDrivenTransferModule(int chunkSize, ObjectStore store, LookupLeases leases, ServerMetrics metrics, Liveness liveness,
            CopyPaths copyPaths, LookupSide lookupSide) {
        this.layerwiseBatch = lookupSide.layerwiseBatch();
        this.chunkSize = chunkSize;
        this.store = store;
        this.leases = leases;
        this.metrics = metrics;
        this.gpu = copyPaths.gpu();
        this.shmSegments = copyPaths.shm();
        this.endOfLife = copyPaths.endOfLife();
        this.copyPaths = copyPaths;
        this.planner = new TransferPlanner(chunkSize);
        this.catalog = lookupSide.catalog();
        this.windowCommit = lookupSide.windowCommit();
        this.failures = new TransferFailures(metrics);
        this.instances = new InstanceRegistry<>(liveness);
    }

    // --- registration --------------------------------------------------------------------------

    /** Runs on the peer's transfer lane: opening CUDA IPC handles may block in the driver. */
    public Reply register(Request.RegisterKvCache request, PeerId peer) {
        blockIfArmed();
        long id = request.instanceId();
        InstanceContext existing = instances.traffic(id, peer);
        if (existing != null && existing.wrappers().equals(request.kvCaches()) && existing.worldSize() == request.worldSize()
                && existing.modelName().equals(request.modelName()) && existing.geometry().builtFrom(request.engineGroups())) {
            LOG.debug("instance {} registered again with the same tensors: kept", id);
            return Reply.NONE;
        }
        if (existing == null && !instances.admits(id, null)) {
            REGISTER_FAILED.error("REGISTER of instance {} from peer {} refused: {} instances are registered already; unregistered, reaped or"
                    + " disconnected ones make room", id, LogText.clip(peer), InstanceRegistry.MAX_INSTANCES);
            metrics.increment(TransferCatalogue.REGISTRATION_FAILURES);
            failedRegistrations.put(id, "too many instances", null);
            return Reply.NONE;
        }
        InstanceContext context;
        try {
            context = createContext(request);
        } catch (LayoutException e) {
            REGISTER_FAILED.error("REGISTER of instance {} (model {}) from peer {} failed: {}; its STORE/RETRIEVE will answer false", id,
                    LogText.clip(request.modelName()), LogText.clip(peer), LogText.message(e.getMessage()));
            metrics.increment(TransferCatalogue.REGISTRATION_FAILURES);
            failedRegistrations.put(id, e.getMessage(), request.kvCaches().isEmpty() ? null : request.kvCaches().getFirst().deviceUuid());
            InstanceContext replaced = instances.remove(id);
            if (replaced != null) {
                replaced.close();
            }
            return Reply.NONE;
        }
        InstanceContext replaced = instances.put(id, context, peer);
        failedRegistrations.remove(id);
        catalog.publish(request.modelName(), request.worldSize(), context.geometry().lookupGeometry());
        if (replaced != null) {
            REGISTERED.info("instance {} re-registered with different tensors: replaced", id);
            replaced.close();
        }
        REGISTERED.info("registered instance {} from peer {}: model {}, world size {}, {} path, {}", id, LogText.clip(peer),
                LogText.clip(request.modelName()), request.worldSize(), context.copyPath().kind(), context.geometry().describe());
        try {
            // a device's first GPU registration starts its warm-up (the CUDA path warmed, its first regions pinned), never waits
            copyPaths.afterRegister().accept(context);
        } catch (RuntimeException e) {
            REGISTER_FAILED.warn("after the REGISTER of instance {}: {} (the registration stands)", id, LogText.message(e.toString()));
        }
        return Reply.NONE;
    }

    /**
     * Test hook ({@code --test-hooks}): the next REGISTER blocks in its handler, as a call stuck in the CUDA driver would (the
     * transfer lanes' deadline answers it). Here, not in the dispatcher: a branch there that the warm-up never takes would
     * throw the compiled request path away at the first REGISTER.
     */
    public void blockNextRegister() {
        blockNextRegister = new CountDownLatch(1);
    }

    private void blockIfArmed() {
        CountDownLatch block = blockNextRegister;
        if (block != null) {
            blockNextRegister = null;
            try {
                block.await(); // never counted down: only the transfer pool's shutdown (an interrupt) ends it
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("test hook: the blocked REGISTER was interrupted by the shutdown", e);
            }
        }
    }

    private InstanceContext createContext(Request.RegisterKvCache request) throws LayoutException {
        CacheGeometry geometry = CacheGeometry.of(request.kvCaches(), request.layoutHints(), request.engineGroups(), chunkSize,
                catalog.separateObjectGroups(), request.engineType());
        long objectBytes = geometry.largestObjectBytes();
        if (objectBytes > store.maxObjectBytes()) {
            throw new LayoutException("a chunk object of this layout takes " + (objectBytes >> 20) + " MiB, more than an L1 region ("
                    + (store.maxObjectBytes() >> 20) + " MiB): raise --l1-region-size-mb or lower --chunk-size");
        }
        if (request.worldSize() < 1) {
            throw new LayoutException("world_size must be at least 1, got " + request.worldSize());
        }
        CopyPath copyPath = copyPaths.open(request.kvCaches());
        return new InstanceContext(request.instanceId(), request.modelName(), request.worldSize(), geometry, copyPath, request.kvCaches(),
                endOfLife);
    }

    /** Only enqueues the release: the mappings are freed on the release thread once no transfer holds them. */
    public Reply unregister(Request.UnregisterKvCache request) {
        InstanceContext removed = instances.remove(request.instanceId());
        failedRegistrations.remove(request.instanceId());
        if (removed == null) {
            metrics.increment(TransferCatalogue.UNKNOWN_UNREGISTERS, "lmcache_driven");
            UNKNOWN_UNREGISTER.warn("UNREGISTER of unknown instance {}", request.instanceId());
        } else {
            removed.close();
            REGISTERED.info("unregistered instance {}", request.instanceId());
        }
        return Reply.NONE;
    }

    // --- transfers -----------------------------------------------------------------------------

    public Reply store(Request.Store request, PeerId peer) {
        long lapNs = System.nanoTime();
        try (InstanceContext.Lease lease = acquire(request.instanceId(), peer, "store")) {
            if (lease == null) {
                return failure(request.instanceId());
            }
            InstanceContext context = lease.context();
            // the GPU's context switch and the worker event's open overlap the planning below
            warm(context, Direction.TO_POOL, request.key(), request.blockIds(), request.eventHandle());
            TransferPlan plan = plan(context, request.key(), request.blockIds(), true);
            if (plan == null) {
                return context.copyPath().failure(Direction.TO_POOL);
            }
            long startNs = times.lap(true, HandlerPhase.PLAN, lapNs);
            // each chunk's hash and objects are made as its pieces go out: the GPU copies the first chunks meanwhile
            ChunkObjects.Reserving reserving = new ChunkObjects.Reserving(store, request.key(), plan);
            StoredObject[] reserved = reserving.objects();
            TransferMetrics.InFlight meter = metrics.transfers().store(context.copyPath().device(), context.instanceId(), context.modelName());
            CopyPath.Copied copied = context.copyPath().copy(Direction.TO_POOL, sink -> GroupPieces.emitReserving(plan, reserving, chunkSize, sink),
                    request.eventHandle(), lease, (ok, bytes, error, finishedNs) -> {
                        // runs on: this lmcache-transfer-* thread (host path) or lmcache-cuda-events (CUDA path), after the emission
                        meter.finished(ok, bytes, plan.range().count());
                        if (ok) {
                            store.commitAll(reserved, new StoreRequest(plan, request.key()));
                            metrics.transfers().committed(context.copyPath().device(), System.nanoTime() - finishedNs);
                        } else {
                            ChunkObjects.abortAll(store, reserved);
                            failures.fail("store", "copy_failed", "STORE for instance " + request.instanceId() + " " + error);
                        }
                    });
            startNs = times.lap(true, HandlerPhase.COPY, startNs);
            plan.hashes().complete(); // the chunks after one without room, and the memo: after the copies are on their way
            if (windowCommit != null) {
                windowCommit.stored(request.key(), plan.hashes());
            }
            if (!reserving.allFit()) {
                noRoom(request.instanceId(), plan);
            }
            enqueueFailed("store", request.instanceId(), copied);
            times.lap(true, HandlerPhase.OBJECTS, startNs);
            times.done(true);
            return new Reply.Transfer(copied.eventHandle(), copied.accepted() && reserving.allFit());
        }
    }

    private void noRoom(long instanceId, TransferPlan plan) {
        ObjectStore.Snapshot pool = store.snapshot();
        long objectBytes = plan.parts().getFirst().objectBytes();
        failures.fail("store", "no_memory", "STORE for instance " + instanceId + ": no room in L1 for a "
                + (objectBytes >> 10) + " KiB chunk (" + (pool.usedBytes() >> 20) + " of " + (pool.readyBytes() >> 20)
                + " MiB ready in use, " + (pool.objects() - pool.evictable()) + " object(s) locked or being written); storing what fit");
    }

    public Reply retrieve(Request.Retrieve request, PeerId peer) {
        if (layerwiseBatch > 0) {
            return refusePerChunkRetrieve(request, peer);
        }
        CacheKey key = request.key();
        long lapNs = System.nanoTime();
        try (InstanceContext.Lease lease = acquire(request.instanceId(), peer, "retrieve")) {
            if (lease == null) {
                return failure(request.instanceId());
            }
            InstanceContext context = lease.context();
            warm(context, Direction.FROM_POOL, request.key(), request.blockIds(), request.eventHandle());
            TransferPlan plan = plan(context, key, request.blockIds(), false, request.skipFirstNTokens());
            if (plan == null) {
                return context.copyPath().failure(Direction.FROM_POOL);
            }
            // SGLang's placeholder pages at the head are left alone whatever unit its skip is in (NullPages)
            int skip = NullPages.retrieveSkip(context.geometry(), request.blockIds(), request.skipFirstNTokens());
            return retrievePlanned(request, skip, context, plan, lease, times.lap(false, HandlerPhase.PLAN, lapNs));
        } finally {
            releaseReadLocks(key);
        }
    }

    /**
     * REGISTER_LAYERWISE_IPC_EVENT_POOL ({@code lmcache_driven_transfer_layerwise.py@1565d9a3}): in layer-wise mode, {@code (N,
     * handles)} of the registration's pool of 256 interprocess events (made at the first ask, as LMCache's
     * {@code _ensure_event_pool}); {@code (0, [])} ("the handle list is empty when layer-wise mode is disabled") when the mode
     * is off, the instance is not registered, its tensors are CPU shared memory (LMCache gives a CPU worker no event backend)
     * or its layers have no per-layer events. The worker stops at registration on {@code (0, [])}: "did not negotiate layer-wise
     * mode" ({@code worker_transfer_layerwise.py@1565d9a3}). LMCache raises on a model of more layers than its pool, which
     * leaves the worker waiting for its timeout; here that is one more {@code (0, [])}.
     */
    public Reply registerLayerwiseEventPool(Request.RegisterLayerwiseEventPool request, PeerId peer) {
        if (layerwiseBatch <= 0) {
            return layerwiseRefused("register_layerwise_ipc_event_pool", "mode_off", "instance " + request.instanceId()
                    + " asked for a layer-wise event pool: this server runs without --layerwise-batch (answered (0, [])); use"
                    + " LMCacheMPConnector, or start the server with --layerwise-batch N", LAYERWISE_OFF);
        }
        try (InstanceContext.Lease lease = acquire(request.instanceId(), peer, "register_layerwise_ipc_event_pool")) {
            if (lease == null) {
                return layerwiseRefused("register_layerwise_ipc_event_pool", "unknown_instance", "no layer-wise event pool for instance "
                        + request.instanceId() + ": it is not registered (answered (0, []))", LAYERWISE_OFF);
            }
            String refusal = layerwiseRefusal(lease.context());
            if (refusal != null) {
                return layerwiseRefused("register_layerwise_ipc_event_pool", "unsupported", "no layer-wise event pool for instance "
                        + request.instanceId() + ": " + refusal + " (answered (0, []))", LAYERWISE_OFF);
            }
            LAYERWISE.info("layer-wise event pool of instance {}: {} events, {} layer(s) per batch", request.instanceId(),
                    LayerEvents.POOL_SIZE, layerwiseBatch);
            return new Reply.LayerwisePool(layerwiseBatch, lease.context().copyPath().layerEventHandles());
        }
    }

    /** Why {@code context} has no layer-wise mode, or null when it has one (its pool then exists). */
    private String layerwiseRefusal(InstanceContext context) {
        try {
            LayerBatches.of(context.geometry(), layerwiseBatch);
            if (context.copyPath().layerEventHandles() == null) {
                return "its KV tensors are CPU shared memory, and layer-wise retrieval needs CUDA events (LMCache has none for CPU workers)";
            }
            return null;
        } catch (LayoutException e) {
            return e.getMessage();
        } catch (RuntimeException e) {
            return "its GPU could not make the event pool: " + e.getMessage();
        }
    }

    /** A refused layer-wise request: counted by op and reason, logged (rate-limited), answered with {@code reply}. */
    private Reply layerwiseRefused(String op, String reason, String line, Reply reply) {
        metrics.increment(TransferCatalogue.LAYERWISE_REFUSED, op, reason);
        LAYERWISE.warn("{}", line);
        return reply;
    }

    /**
     * Plain RETRIEVE in layer-wise mode: refused with {@code (b"", False)} and the rank's read locks given back, as LMCache's
     * layer-wise module's {@code retrieve} ({@code lmcache_driven_transfer_layerwise.py@1565d9a3}): "this MP server ... serves
     * RETRIEVE_LAYERWISE only".
     */
    private Reply refusePerChunkRetrieve(Request.Retrieve request, PeerId peer) {
        instances.traffic(request.instanceId(), peer);
        releaseReadLocks(request.key());
        return layerwiseRefused("retrieve", "per_chunk_in_layerwise_mode", "per-chunk RETRIEVE of instance " + request.instanceId()
                + " refused: this server runs with --layerwise-batch " + layerwiseBatch + " and serves RETRIEVE_LAYERWISE only; load"
                + " LMCacheLayerwiseMPConnector, or restart without --layerwise-batch", new Reply.Transfer(new byte[0], false));
    }

    /**
     * RETRIEVE_LAYERWISE ({@code lmcache_driven_transfer_layerwise.py@1565d9a3}): the copy out of the pool split by layer batch,
     * each batch's copies followed by its pool event and one frame {@code (batch, False, False)} sent at once through
     * {@code partials}; then the last frame {@code (b"", True, accepted)}. Every request that cannot be served gets only the
     * last frame {@code (b"", True, False)} (the worker recomputes), and the rank's read locks back.
     */
    public Reply retrieveLayerwise(Request.RetrieveLayerwise layerwise, PeerId peer, ReplyChannel partials) {
        Request.Retrieve request = layerwise.retrieve();
        if (layerwiseBatch <= 0) {
            releaseReadLocks(request.key());
            return layerwiseRefused("retrieve_layerwise", "mode_off", "RETRIEVE_LAYERWISE for instance " + request.instanceId()
                    + ": answered as a miss (this server runs without --layerwise-batch)", LAYERWISE_MISS);
        }
        try (InstanceContext.Lease lease = acquire(request.instanceId(), peer, "retrieve_layerwise")) {
            if (lease == null) {
                return LAYERWISE_MISS;
            }
            String refusal = layerwiseRefusal(lease.context());
            if (refusal != null) {
                return layerwiseRefused("retrieve_layerwise", "unsupported", "RETRIEVE_LAYERWISE for instance " + request.instanceId()
                        + " answered as a miss: " + refusal, LAYERWISE_MISS);
            }
            return retrieveLayers(request, lease, partials);
        } finally {
            releaseReadLocks(request.key());
        }
    }

    private Reply retrieveLayers(Request.Retrieve request, InstanceContext.Lease lease, ReplyChannel partials) {
        InstanceContext context = lease.context();
        LayerBatches batches;
        try {
            batches = LayerBatches.of(context.geometry(), layerwiseBatch);
        } catch (LayoutException e) {
            return LAYERWISE_MISS; // layerwiseRefusal saw the same geometry: not reached
        }
        if (EventHandle.classify(request.eventHandle()) instanceof EventHandle.Malformed bad) {
            return layerwiseRefused("retrieve_layerwise", "malformed_event", "RETRIEVE_LAYERWISE for instance " + request.instanceId()
                    + " answered as a miss: " + bad.reason(), LAYERWISE_MISS);
        }
        // as a per-chunk RETRIEVE: the GPU's context switch overlaps the plan
        warm(context, Direction.FROM_POOL, request.key(), request.blockIds(), request.eventHandle());
        TransferPlan plan = plan(context, request.key(), request.blockIds(), false, request.skipFirstNTokens());
        int skip = plan == null ? -1 : NullPages.retrieveSkip(context.geometry(), request.blockIds(), request.skipFirstNTokens());
        if (skip < 0) {
            return LAYERWISE_MISS;
        }
        StoredObject[] pinned = ChunkObjects.pinAll(store, request.key(), plan);
        if (pinned == null) {
            failures.fail("retrieve_layerwise", "not_found", null);
            return LAYERWISE_MISS;
        }
        TransferMetrics.InFlight meter = metrics.transfers().retrieve(context.copyPath().device(), context.instanceId(), context.modelName(),
                request.key().workerId(), request.key().cacheSalt());
        CopyPath.Completion done = (ok, bytes, error, finishedNs) -> {
            // runs on: lmcache-cuda-events, or this thread when the copy could not start
            ChunkObjects.unpinAll(store, pinned, ok);
            meter.finished(ok, bytes, plan.range().count());
            if (!ok) {
                failures.fail("retrieve_layerwise", "copy_failed", "RETRIEVE_LAYERWISE for instance " + request.instanceId() + " " + error);
            }
        };
        CopyPath.Copied copied;
        try {
            copied = context.copyPath().copyLayerwise((sink, marks) -> {
                for (int b = 0; b < batches.count(); b++) {
                    GroupPieces.emitLayers(plan, pinned, skip, chunkSize, batches, b, sink);
                    marks.batchEnd(batches.leader(b)); // the batch's event after its copies, then its frame: the worker waits on it
                    partials.send(new Reply.LayerwiseFrame(batches.frame(b), false, false));
                    metrics.increment(TransferCatalogue.LAYERWISE_BATCHES);
                }
            }, request.eventHandle(), lease, done);
        } catch (RuntimeException e) {
            // refused before anything was enqueued (no pool could be made): the completion has not run
            done.done(false, 0, "could not start: " + e.getMessage(), System.nanoTime());
            return LAYERWISE_MISS;
        }
        enqueueFailed("retrieve_layerwise", request.instanceId(), copied);
        return new Reply.LayerwiseFrame(new byte[0], true, copied.accepted());
    }

    /** This worker's share of the lookup's read locks, also when the retrieve failed or was refused. */
    private void releaseReadLocks(CacheKey key) {
        ChunkRange range = ChunkRange.of(key, chunkSize, new String[1]);
        if (range != null && key.hasWorker()) {
            leases.releaseRetrieved(key.requestId(), key.workerId(), range.firstChunk(), range.endChunk());
        }
    }

    private Reply retrievePlanned(Request.Retrieve request, int skipTokens, InstanceContext context, TransferPlan plan,
            InstanceContext.Lease lease, long plannedNs) {
        if (skipTokens < 0) {
            failures.fail("retrieve", "bad_skip", "RETRIEVE with skip_first_n_tokens " + request.skipFirstNTokens());
            return context.copyPath().failure(Direction.FROM_POOL);
        }
        // each chunk's objects are pinned as its pieces go out (the GPU copies the first chunks meanwhile), or all first while
        // a write is in flight that a pin may have to wait for
        ChunkObjects.Pinning pinning = ChunkObjects.Pinning.forRetrieve(store, request.key(), plan);
        long startNs = times.lap(false, HandlerPhase.OBJECTS, plannedNs);
        TransferMetrics.InFlight meter = metrics.transfers().retrieve(context.copyPath().device(), context.instanceId(), context.modelName(),
                request.key().workerId(), request.key().cacheSalt());
        CopyPath.Copied copied = context.copyPath().copy(Direction.FROM_POOL,
                sink -> GroupPieces.emitPinning(plan, pinning, skipTokens, chunkSize, sink), request.eventHandle(), lease,
                (ok, bytes, error, finishedNs) -> {
                    // runs on: this lmcache-transfer-* thread (host path) or lmcache-cuda-events (CUDA path), after the emission
                    ChunkObjects.unpinAll(store, pinning.objects(), ok);
                    meter.finished(ok && pinning.allFound(), bytes, plan.range().count());
                    if (!ok) {
                        failures.fail("retrieve", "copy_failed", "RETRIEVE for instance " + request.instanceId() + " " + error);
                    }
                });
        if (!pinning.allFound()) {
            failures.fail("retrieve", "not_found", null);
            metrics.declare(L1Catalogue.READ_FAILURE_CHUNKS, "l1_retrieve", "not_found", metrics.label("model_name", context.modelName()))
                    .add(plan.range().count());
        }
        enqueueFailed("retrieve", request.instanceId(), copied);
        times.lap(false, HandlerPhase.COPY, startNs);
        times.done(false);
        return new Reply.Transfer(copied.eventHandle(), copied.accepted() && pinning.allFound());
    }

    /**
     * Tells the copy path a transfer starts, how long its first piece is (the first kernel group's first chunk), which event
     * the worker recorded and how many chunks the key spans (0 when its range is bad: the plan refuses it next).
     */
    private void warm(InstanceContext context, Direction direction, CacheKey key, int[][] blockIds, byte[] clientEvent) {
        KernelGroup first = context.geometry().kernels().getFirst();
        int[] ids = blockIds.length > first.index() ? blockIds[first.index()] : null;
        ChunkRange range = ChunkRange.of(key, chunkSize, new String[1]);
        context.copyPath().warm(direction, PiecePlanner.firstPieceBytes(first, ids), clientEvent, range == null ? 0 : range.count());
    }

    private void enqueueFailed(String op, long instanceId, CopyPath.Copied copied) {
        if (copied.enqueueError() != null) {
            failures.fail(op, "copy_failed", op.toUpperCase() + " for instance " + instanceId + " could not be enqueued: "
                    + copied.enqueueError());
        }
    }

    private TransferPlan plan(InstanceContext context, CacheKey key, int[][] blockIds, boolean store) {
        return plan(context, key, blockIds, store, 0);
    }

    private TransferPlan plan(InstanceContext context, CacheKey key, int[][] blockIds, boolean store, int requestedSkip) {
        String op = store ? "store" : "retrieve";
        return switch (planner.plan(context, key, blockIds, store, requestedSkip)) {
            case PlanResult.Planned planned -> planned.plan();
            case PlanResult.Refused refused -> {
                failures.refused(op, context.instanceId(), refused);
                yield null;
            }
        };
    }

    /**
     * The failure reply for an instance we do not know: the complete event of the GPU its failed
     * registration named, or of the first GPU (64 zero bytes without CUDA).
     */
    private Reply failure(long instanceId) {
        RegistrationFailures.Failed failed = failedRegistrations.get(instanceId);
        try {
            return new Reply.Transfer(gpu.failureEvent(failed == null ? null : failed.deviceUuid()), false);
        } catch (CudaException e) {
            NO_FAILURE_EVENT.error("cannot record a failure event for unknown instance {}: {}", instanceId, LogText.message(e.getMessage()));
            return FailureReplies.transferFailed();
        }
    }

    /** A lease on the registered instance (its traffic refreshes its liveness), or null (counted and logged) when there is none. */
    private InstanceContext.Lease acquire(long instanceId, PeerId peer, String op) {
        InstanceContext context = instances.traffic(instanceId, peer);
        InstanceContext.Lease lease = context == null ? null : context.acquire();
        if (lease != null) {
            return lease;
        }
        RegistrationFailures.Failed failed = failedRegistrations.get(instanceId);
        failures.fail(op, failed != null ? "registration_failed" : "unknown_instance", op.toUpperCase() + " for instance " + instanceId
                + (failed != null ? " whose registration failed: " + failed.reason() : " that is not registered"));
        return null;
    }

    /** Per world size, the object shapes of a registered instance of this model (what L2 loads reserve and stores are keyed by). */
    public Map<Integer, List<ObjectShape>> objectShapes(String model) {
        Map<Integer, List<ObjectShape>> byWorldSize = new LinkedHashMap<>();
        for (InstanceRegistry.Registered<InstanceContext> registered : instances.snapshot()) {
            InstanceContext context = registered.context();
            if (context.modelName().equals(model) && !byWorldSize.containsKey(context.worldSize())) {
                List<ObjectShape> shapes = new ArrayList<>();
                for (ObjectGroup group : context.geometry().objects()) {
                    shapes.add(new ObjectShape(group.index(), group.objectBytes(), group.format(),
                            ObjectGroups.lmcacheObjectLayout(group) ? 0 : group.format(), ObjectGroups.l2Layout(group)));
                }
                byWorldSize.put(context.worldSize(), shapes);
            }
        }
        return byWorldSize;
    }

    /** Per world size, the object groups of a registered instance of this model (the HTTP KV bytes API's layout, issue 49). */
    public Map<Integer, List<ObjectGroup>> objectGroups(String model) {
        Map<Integer, List<ObjectGroup>> byWorldSize = new LinkedHashMap<>();
        for (InstanceRegistry.Registered<InstanceContext> registered : instances.snapshot()) {
            InstanceContext context = registered.context();
            if (context.modelName().equals(model)) {
                byWorldSize.putIfAbsent(context.worldSize(), context.geometry().objects());
            }
        }
        return byWorldSize;
    }

    /** LMCache's {@code registered_gpu_ids} and {@code cache_context_meta} status entries. */
    public void status(Map<String, Object> status, PeerConnections connections) {
        InstanceStatus.put(status, instances.snapshot(), connections, chunkSize);
        status.put("transfer_handler_cpu", times.status());
        status.put("store_commit_delay", metrics.transfers().commitDelayStatus());
        status.put("shm_mappings", shmSegments.mappings().status());
        status.put("cpu_copy", copyPaths.hostCopies().status());
    }

    // --- liveness ---------------------------------------------------------------------------

    @Override
    public String livenessName() {
        return "lmcache_driven_transfer";
    }

    @Override
    public void touchInstance(long instanceId, PeerId peer) {
        instances.ping(instanceId, peer);
    }

    @Override
    public List<Reaped> reapStaleInstances(long timeoutNs, long graceNs) {
        return instances.reapStale(timeoutNs, graceNs);
    }

    @Override
    public int trackedInstanceCount() {
        return instances.count();
    }

    /** The same release as UNREGISTER: the mappings go to the release thread (now, or when the transfers in flight finish). */
    @Override
    public void dropInstanceState(long instanceId) {
        InstanceContext context = instances.takeReaped(instanceId);
        failedRegistrations.remove(instanceId);
        if (context != null) {
            context.close();
        }
    }

    /** Closes every registered instance (shutdown): their mappings go to the release thread. */
    public void close() {
        instances.drainAll().forEach(InstanceContext::close);
    }
}
