package io.lmcache.server.module;

import io.lmcache.server.liveness.InstanceLivenessTarget;
import io.lmcache.server.liveness.InstanceRegistry;
import io.lmcache.server.liveness.Liveness;
import io.lmcache.server.metrics.TransferCatalogue;
import io.lmcache.server.module.EngineDrivenContext.Pending;
import io.lmcache.server.module.EngineDrivenContext.PendingKey;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.logging.RateLimitedLogs;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.CacheKey;
import io.lmcache.server.protocol.DType;
import io.lmcache.server.protocol.EngineDrivenRegistration;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.storage.L1Pool;
import io.lmcache.server.storage.ObjectStore;
import io.lmcache.server.storage.StoredObject;
import io.lmcache.server.tables.WireKey;
import io.lmcache.server.transfer.ChunkHashes;
import io.lmcache.server.transfer.ChunkObjects;
import io.lmcache.server.transfer.ChunkRange;
import io.lmcache.server.transfer.KvLayout;
import io.lmcache.server.transfer.ObjectShape;
import io.lmcache.server.transfer.PlanResult;
import io.lmcache.server.transfer.TransferPlanner;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Engine-driven transfers (protocol doc §7.3): the worker copies its paged KV itself, into and out
 * of slots of the server's L1 pool, which it maps from /dev/shm. PREPARE_STORE reserves (write-locks)
 * objects for the chunks not stored yet and hands out their slots; COMMIT_STORE publishes them.
 * PREPARE_RETRIEVE pins the stored chunks (all or nothing) and hands out their slots; COMMIT_RETRIEVE
 * releases them. Slots of a worker that never commits go back at their TTL or when the reaper frees
 * the worker, never later. Only the shared-memory data path is served; the pickle path is refused.
 *
 * <p>A reservation never holds its chunks from others: LOOKUP counts it as a miss (not pending: the worker may die), another
 * PREPARE_STORE of the same chunks supersedes it ({@link ObjectStore#reserveExternal}), and when its worker is gone it is
 * released at once: at UNREGISTER, at the reap, and at the housekeeping tick after its connection closed (then only out of
 * sight: the memory waits for the reap or the TTL, as a worker that only lost its connection may still write into it).
 */
public final class EngineDrivenTransferModule implements InstanceLivenessTarget {
    private static final Logger LOG = LoggerFactory.getLogger(EngineDrivenTransferModule.class);
    // a peer can cause each of these once per message: rate-limited, one budget per kind (failures: per reason)
    private static final RateLimitedLogs FAILURE_LINES = new RateLimitedLogs(LOG, "engine-driven failures", 10);
    private static final RateLimitedLog REGISTERED = new RateLimitedLog(LOG, "engine-driven REGISTER/UNREGISTER", 100);
    private static final RateLimitedLog UNKNOWN_UNREGISTER = new RateLimitedLog(LOG, "UNREGISTER of an unknown engine-driven instance", 10);
    private static final Reply ALL_CACHED = new Reply.PrepareStore(List.of(), new int[0]);
    private static final Reply MISS = new Reply.PrepareRetrieve(false, List.of());

    private final int chunkSize;
    private final ObjectStore store;
    private final L1Pool pool;
    private final LookupLeases leases;
    private final ServerMetrics metrics;
    private final Liveness liveness;
    private final long writeTtlNs;
    private final long readTtlNs;
    private final TransferPlanner planner;
    private final InstanceRegistry<EngineDrivenContext> contexts;

    /** How long a worker's reserved (write) and pinned (read) slots live without their commit. */
    public record SlotTtls(long writeNs, long readNs) {}

    public EngineDrivenTransferModule(int chunkSize, ObjectStore store, L1Pool pool, LookupLeases leases, ServerMetrics metrics,
            Liveness liveness, SlotTtls ttls) {
        this.chunkSize = chunkSize;
        this.store = store;
        this.pool = pool;
        this.leases = leases;
        this.metrics = metrics;
        this.liveness = liveness;
        this.writeTtlNs = ttls.writeNs();
        this.readTtlNs = ttls.readNs();
        this.planner = new TransferPlanner(chunkSize);
        // what a registration keeps from the wire is its model name (the dtype is one of a few): 64 MiB of them at most
        this.contexts = new InstanceRegistry<>(liveness, context -> 512 + WireKey.bytes(context.registration.modelName()), 64L << 20);
        for (Gone gone : Gone.values()) {
            if (gone.label == null) {
                continue;
            }
            metrics.declare(TransferCatalogue.ENGINE_DRIVEN_RELEASED, "store", gone.label);
            if (gone != Gone.DISCONNECT) {
                metrics.declare(TransferCatalogue.ENGINE_DRIVEN_RELEASED, "retrieve", gone.label);
            }
        }
        for (Op op : new Op[] {Op.PREPARE_STORE, Op.COMMIT_STORE, Op.PREPARE_RETRIEVE, Op.COMMIT_RETRIEVE}) {
            for (String reason : new String[] {"unknown_instance", "bad_range", "bad_worker_id", "no_reservation", "too_many_pending"}) {
                metrics.declare(TransferCatalogue.ENGINE_DRIVEN_FAILURES, op.wireName(), reason);
            }
        }
    }

    // --- registration --------------------------------------------------------------------------

    public Reply register(Request.RegisterEngineDrivenContext request, PeerId peer) {
        EngineDrivenRegistration r = request.registration();
        if (!pool.isShared()) {
            fail(Op.REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT, "no_shared_pool", "engine-driven worker " + r.instanceId()
                    + ": the L1 pool is not in /dev/shm (anonymous memory), and the pickle data path is not supported; its stores and"
                    + " retrieves will fail. Give the server a /dev/shm large enough for --l1-size-gb");
            return new Reply.EnginePool("", 0);
        }
        String invalid = validate(r);
        if (invalid != null) {
            fail(Op.REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT, "bad_registration", "engine-driven REGISTER of instance " + r.instanceId()
                    + " refused: " + invalid);
            return new Reply.EnginePool("", 0);
        }
        DType dtype = DType.fromTorchName(r.dtypeStr());
        int tokens = r.numPhysicalSlots() > 0 ? r.numPhysicalSlots() : chunkSize;
        long objectBytes = (r.useMla() ? 1L : 2L) * r.numLayers() * tokens * r.hiddenDimSize() * dtype.elementSize();
        if (objectBytes > store.maxObjectBytes()) {
            fail(Op.REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT, "bad_registration", "engine-driven REGISTER of instance " + r.instanceId()
                    + ": a chunk object takes " + (objectBytes >> 20) + " MiB, more than an L1 region (" + (store.maxObjectBytes() >> 20)
                    + " MiB); raise --l1-region-size-mb");
            return new Reply.EnginePool("", 0);
        }
        int[] shape = r.useMla() ? new int[] {r.numLayers(), tokens, r.hiddenDimSize()} : new int[] {2, r.numLayers(), tokens, r.hiddenDimSize()};
        int format = KvLayout.tokenMajorFormat(r.useMla() ? 1 : 2, dtype);
        EngineDrivenContext existing = contexts.traffic(r.instanceId(), peer);
        if (existing != null && existing.registration.equals(r)) {
            return poolReply();
        }
        EngineDrivenContext created = new EngineDrivenContext(r, objectBytes, shape, format);
        if (!contexts.admits(r.instanceId(), created)) {
            fail(Op.REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT, "too_many_instances", "engine-driven REGISTER of instance " + r.instanceId()
                    + " refused: " + InstanceRegistry.MAX_INSTANCES + " instances (or 64 MiB of their model names) are registered already;"
                    + " unregistered, reaped or disconnected ones make room");
            return new Reply.EnginePool("", 0);
        }
        EngineDrivenContext replaced = contexts.put(r.instanceId(), created, peer);
        if (replaced != null) {
            release(replaced, Gone.REPLACED);
        }
        REGISTERED.info("registered engine-driven instance {} from peer {}: model {}, world size {}, {} layers x {} tokens x {} ({}{}), "
                + "{} KiB chunk objects in /dev/shm/{}", r.instanceId(), LogText.clip(peer), LogText.clip(r.modelName()), r.worldSize(),
                r.numLayers(), tokens, r.hiddenDimSize(), LogText.clip(r.dtypeStr()), r.useMla() ? ", single plane" : ", K and V",
                objectBytes >> 10, pool.shmName());
        return poolReply();
    }

    private Reply poolReply() {
        return new Reply.EnginePool(pool.shmName(), pool.bytes());
    }

    private String validate(EngineDrivenRegistration r) {
        if (r.numLayers() <= 0 || r.hiddenDimSize() <= 0 || r.blockSize() <= 0 || r.worldSize() <= 0 || r.numPhysicalSlots() < 0) {
            return "num_layers, hidden_dim_size, block_size and world_size must be positive, got " + r;
        }
        if (DType.fromTorchName(r.dtypeStr()) == null) {
            return "unknown dtype_str '" + r.dtypeStr() + "'";
        }
        if (chunkSize % r.blockSize() != 0) {
            return "block size " + r.blockSize() + " must divide the chunk size " + chunkSize;
        }
        if (r.kvGroups() > 1) {
            // LMCache refuses this as well (#4071): one payload describes one object layout
            return "a hybrid model with " + r.kvGroups() + " KV-cache groups cannot use engine-driven transfers; run it with"
                    + " lmcache.mp.mp_transfer_mode=lmcache_driven (CUDA workers)";
        }
        return null;
    }

    public Reply unregister(Request.UnregisterEngineDrivenContext request) {
        EngineDrivenContext removed = contexts.remove(request.instanceId());
        if (removed == null) {
            metrics.increment(TransferCatalogue.UNKNOWN_UNREGISTERS, "engine_driven");
            UNKNOWN_UNREGISTER.warn("UNREGISTER of unknown engine-driven instance {}", request.instanceId());
        } else {
            release(removed, Gone.UNREGISTER);
            REGISTERED.info("unregistered engine-driven instance {}", request.instanceId());
        }
        return Reply.NONE;
    }

    // --- store -----------------------------------------------------------------------------------

    public Reply prepareStore(Request.PrepareStore request, PeerId peer) {
        EngineDrivenContext context = context(request.instanceId(), peer, Op.PREPARE_STORE);
        CacheKey key = request.key();
        Resolved resolved = context == null ? null : resolve(context, key, Op.PREPARE_STORE);
        if (resolved == null) {
            return ALL_CACHED;
        }
        if (!context.admits(resolved.pendingKey())) {
            fail(Op.PREPARE_STORE, "too_many_pending", "PREPARE_STORE for engine-driven instance " + request.instanceId() + ": "
                    + EngineDrivenContext.MAX_PENDING + " prepared transfers (or their keys' bytes) are not committed yet; storing nothing");
            return ALL_CACHED;
        }
        List<StoredObject> reserved = new ArrayList<>();
        List<Reply.Slot> slots = new ArrayList<>();
        int[] indices = new int[resolved.range().count()];
        int count = 0;
        for (int j = 0; j < resolved.range().count(); j++) {
            int chunk = resolved.range().firstChunk() + j;
            // the worker fills it through the shared pool and may die: its end, the reap or the write TTL frees it
            StoredObject object = ChunkObjects.reserveExternal(store, key, resolved.hashes(), chunk, 0, context.objectBytes,
                    context.format);
            if (object == ObjectStore.NO_MEMORY) {
                fail(Op.PREPARE_STORE, "no_memory", "PREPARE_STORE for engine-driven instance " + request.instanceId()
                        + ": no room in L1 for chunk " + j + " of " + resolved.range().count() + "; reserving the chunks before it only");
                break;
            }
            if (object != ObjectStore.EXISTS) {
                reserved.add(object);
                slots.add(new Reply.Slot(object.offset(), context.objectBytes, context.slotShape, context.registration.dtypeStr()));
                indices[count++] = j;
            }
        }
        if (reserved.isEmpty()) {
            return ALL_CACHED;
        }
        Pending previous = context.putWrite(resolved.pendingKey(), new Pending(reserved, liveness.nowNs()));
        if (previous != null) {
            ChunkObjects.abortAll(store, previous.objects());
        }
        return new Reply.PrepareStore(slots, Arrays.copyOf(indices, count));
    }

    /**
     * COMMIT_STOREs are counted on the KV-event log, never announced: LMCache's engine-driven {@code commit_store}
     * (stored id 55654804526) publishes no {@code MP_TOKENS} binding (only the GPU STORE path does,
     * {@code _publish_token_bindings}), so its KV-event subscriber skips those writes as unbound (kv-events.md §6). Their
     * removals from L1 are announced, as every L1 removal.
     */
    public Reply commitStore(Request.CommitStore request, PeerId peer) {
        EngineDrivenContext context = context(request.instanceId(), peer, Op.COMMIT_STORE);
        if (context == null) {
            return Reply.FALSE;
        }
        Resolved resolved = resolve(context, request.key(), Op.COMMIT_STORE);
        if (resolved == null) {
            return Reply.FALSE;
        }
        Pending pending = context.takeWrite(resolved.pendingKey());
        if (request.data().length > 0) {
            // the pickle data path, or a newer client's abort sentinel: either way nothing of ours is published
            if (pending != null) {
                ChunkObjects.abortAll(store, pending.objects());
            }
            fail(Op.COMMIT_STORE, "pickle_data", "COMMIT_STORE from engine-driven instance " + request.instanceId() + " carries "
                    + request.data().length + " bytes of data: the pickle data path is not supported (use the /dev/shm pool)");
            return Reply.FALSE;
        }
        if (pending == null) {
            fail(Op.COMMIT_STORE, "no_reservation", "COMMIT_STORE from engine-driven instance " + request.instanceId()
                    + " with no reservation pending for " + request.key() + " (no PREPARE_STORE, already committed, or expired)");
            return Reply.FALSE;
        }
        // no origin: the KV-event recorder counts these objects as unbound, never announces them
        boolean all = store.commitAll(pending.objects().toArray(StoredObject[]::new), null);
        if (!all) {
            fail(Op.COMMIT_STORE, "expired", "COMMIT_STORE from engine-driven instance " + request.instanceId()
                    + ": a reservation expired (write TTL) or was cleared before the commit");
        }
        return all ? Reply.TRUE : Reply.FALSE;
    }

    // --- retrieve --------------------------------------------------------------------------------

    public Reply prepareRetrieve(Request.PrepareRetrieve request, PeerId peer) {
        EngineDrivenContext context = context(request.instanceId(), peer, Op.PREPARE_RETRIEVE);
        CacheKey key = request.key();
        Resolved resolved = context == null ? null : resolve(context, key, Op.PREPARE_RETRIEVE);
        if (resolved == null || resolved.range().count() == 0) {
            rememberMiss(context, resolved);
            return MISS;
        }
        if (!context.admits(resolved.pendingKey())) {
            fail(Op.PREPARE_RETRIEVE, "too_many_pending", "PREPARE_RETRIEVE for engine-driven instance " + request.instanceId() + ": "
                    + EngineDrivenContext.MAX_PENDING + " prepared transfers (or their keys' bytes) are not committed yet; a miss");
            return MISS;
        }
        List<StoredObject> pinned = new ArrayList<>();
        for (int j = 0; j < resolved.range().count(); j++) {
            int chunk = resolved.range().firstChunk() + j;
            StoredObject object = ChunkObjects.pin(store, key, resolved.hashes(), chunk, 0, context.objectBytes, context.format);
            if (object == null) {
                ChunkObjects.unpinAll(store, pinned, false);
                rememberMiss(context, resolved);
                return MISS;
            }
            pinned.add(object);
        }
        List<Reply.Slot> slots = new ArrayList<>(pinned.size());
        for (StoredObject object : pinned) {
            slots.add(new Reply.Slot(object.offset(), context.objectBytes, context.slotShape, context.registration.dtypeStr()));
        }
        Pending previous = context.putRead(resolved.pendingKey(), new Pending(pinned, liveness.nowNs()));
        if (previous != null) {
            ChunkObjects.unpinAll(store, previous.objects(), false);
        }
        return new Reply.PrepareRetrieve(true, slots);
    }

    /** A miss is followed by a COMMIT_RETRIEVE too: remember it, so that commit is answered true without a warning. */
    private void rememberMiss(EngineDrivenContext context, Resolved resolved) {
        if (context == null || resolved == null || !context.admits(resolved.pendingKey())) {
            return; // past the caps: the commit that follows answers false (counted as no_reservation)
        }
        Pending previous = context.putRead(resolved.pendingKey(), new Pending(List.of(), liveness.nowNs()));
        if (previous != null) {
            ChunkObjects.unpinAll(store, previous.objects(), false);
        }
    }

    public Reply commitRetrieve(Request.CommitRetrieve request, PeerId peer) {
        EngineDrivenContext context = context(request.instanceId(), peer, Op.COMMIT_RETRIEVE);
        if (context == null) {
            return Reply.FALSE;
        }
        CacheKey key = request.key();
        Resolved resolved = resolve(context, key, Op.COMMIT_RETRIEVE);
        if (resolved == null) {
            return Reply.FALSE;
        }
        Pending pending = context.takeRead(resolved.pendingKey());
        if (pending == null) {
            fail(Op.COMMIT_RETRIEVE, "no_reservation", "COMMIT_RETRIEVE from engine-driven instance " + request.instanceId()
                    + " with nothing pending for " + key + " (no PREPARE_RETRIEVE, or already committed)");
            return Reply.FALSE;
        }
        ChunkObjects.unpinAll(store, pending.objects(), true);
        leases.releaseRetrieved(key.requestId(), key.workerId(), resolved.range().firstChunk(), resolved.range().endChunk());
        return Reply.TRUE;
    }

    // --- shared ----------------------------------------------------------------------------------

    private record Resolved(ChunkRange range, ChunkHashes hashes, PendingKey pendingKey) {}

    private Resolved resolve(EngineDrivenContext context, CacheKey key, Op op) {
        return switch (planner.keyPlan(key)) {
            case PlanResult.Refused refused -> {
                fail(op, refused.reason(), op.wireName().toUpperCase() + " for engine-driven instance " + context.registration.instanceId()
                        + ": " + refused.message());
                yield null;
            }
            case PlanResult.Planned planned -> {
                ChunkRange range = planned.plan().range();
                ChunkHashes hashes = planned.plan().hashes();
                int end = range.endChunk();
                yield new Resolved(range, hashes, new PendingKey(key.modelName(), key.cacheSalt(), key.tags(), key.worldSize(),
                        key.workerId(), key.start(), key.end(), end == 0 ? null : hashes.hash(end - 1)));
            }
        };
    }

    private EngineDrivenContext context(long instanceId, PeerId peer, Op op) {
        EngineDrivenContext context = contexts.traffic(instanceId, peer);
        if (context == null) {
            fail(op, "unknown_instance", op.wireName().toUpperCase() + " for engine-driven instance " + instanceId + " that is not registered");
        }
        return context;
    }

    /** Why a worker's reservations and pins were given back before their commit (the label of {@code engine_driven_released}). */
    private enum Gone {
        DISCONNECT("disconnect"),
        UNREGISTER("unregister"),
        REAPED("reaped"),
        REPLACED("replaced"),
        SHUTDOWN(null);

        final String label;

        Gone(String label) {
            this.label = label;
        }
    }

    /** Gives back everything an instance has pending: reservations are dropped, pinned slots released. */
    private void release(EngineDrivenContext context, Gone why) {
        List<Pending> writes = new ArrayList<>();
        List<Pending> reads = new ArrayList<>();
        context.drain(writes, reads);
        giveBack(writes, reads);
        if (why.label != null) {
            count(writes, "store", why);
            count(reads, "retrieve", why);
        }
    }

    private void count(List<Pending> pending, String kind, Gone why) {
        long objects = 0;
        for (Pending p : pending) {
            objects += p.objects().size();
        }
        if (objects > 0) {
            metrics.declare(TransferCatalogue.ENGINE_DRIVEN_RELEASED, kind, why.label).add(objects);
        }
    }

    /**
     * The reservations of workers whose connection closed leave the store's sight at once (a clean miss; another writer may
     * store the chunks); their memory stays the worker's until the reap, UNREGISTER or the TTL (see {@link ObjectStore#disown}).
     */
    private void disownClosed() {
        for (InstanceRegistry.Registered<EngineDrivenContext> registered : contexts.snapshot()) {
            EngineDrivenContext context = registered.context();
            if (context.hasWrites() && liveness.connectionClosed(registered.peer())) {
                List<Pending> disowned = context.disownWrites();
                disowned.forEach(pending -> pending.objects().forEach(store::disown));
                count(disowned, "store", Gone.DISCONNECT);
                FAILURE_LINES.of("disconnect").warn("engine-driven instance {}: its connection closed with {} reservation(s) pending;"
                        + " released (a later COMMIT_STORE answers false)", registered.instanceId(), disowned.size());
            }
        }
    }

    private void giveBack(List<Pending> writes, List<Pending> reads) {
        writes.forEach(pending -> ChunkObjects.abortAll(store, pending.objects()));
        reads.forEach(pending -> ChunkObjects.unpinAll(store, pending.objects(), false));
    }

    /** Drops reservations and pinned slots older than their TTL (a worker that never committed). Runs on lmcache-housekeeping. */
    public void sweep() {
        disownClosed();
        long nowNs = liveness.nowNs();
        List<Pending> staleWrites = new ArrayList<>();
        List<Pending> staleReads = new ArrayList<>();
        for (InstanceRegistry.Registered<EngineDrivenContext> registered : contexts.snapshot()) {
            registered.context().collectExpired(nowNs - writeTtlNs, nowNs - readTtlNs, staleWrites, staleReads);
        }
        giveBack(staleWrites, staleReads);
        if (!staleWrites.isEmpty() || !staleReads.isEmpty()) {
            LOG.warn("engine-driven: reclaimed {} reservation(s) and {} pinned retrieve(s) their workers never committed",
                    staleWrites.size(), staleReads.size());
            for (int i = 0; i < staleWrites.size(); i++) {
                metrics.increment(TransferCatalogue.ENGINE_DRIVEN_EXPIRED, "store");
            }
            for (int i = 0; i < staleReads.size(); i++) {
                metrics.increment(TransferCatalogue.ENGINE_DRIVEN_EXPIRED, "retrieve");
            }
        }
    }

    private void fail(Op op, String reason, String message) {
        metrics.increment(TransferCatalogue.ENGINE_DRIVEN_FAILURES, op.wireName(), reason);
        FAILURE_LINES.of(reason).warn("{}; answering with the failure value", LogText.message(message));
    }

    /** Per world size, the object shape of a registered instance of this model (what L2 loads reserve and stores are keyed by). */
    public Map<Integer, List<ObjectShape>> objectShapes(String model) {
        Map<Integer, List<ObjectShape>> byWorldSize = new LinkedHashMap<>();
        for (InstanceRegistry.Registered<EngineDrivenContext> registered : contexts.snapshot()) {
            EngineDrivenContext context = registered.context();
            if (context.registration.modelName().equals(model)) {
                byWorldSize.putIfAbsent(context.registration.worldSize(), List.of(new ObjectShape(0, context.objectBytes, context.format)));
            }
        }
        return byWorldSize;
    }

    /** LMCache's {@code registered_non_cuda_instance_ids} and {@code non_cuda_context_meta} status entries. */
    public void status(Map<String, Object> status) {
        List<Long> ids = new ArrayList<>();
        Map<String, Object> meta = new LinkedHashMap<>();
        for (InstanceRegistry.Registered<EngineDrivenContext> registered : contexts.snapshot()) {
            ids.add(registered.instanceId());
            meta.put(Long.toString(registered.instanceId()), registered.context().status());
        }
        status.put("registered_non_cuda_instance_ids", ids);
        status.put("non_cuda_context_meta", meta);
    }

    // --- liveness ---------------------------------------------------------------------------

    @Override
    public String livenessName() {
        return "engine_driven_transfer";
    }

    @Override
    public void touchInstance(long instanceId, PeerId peer) {
        contexts.ping(instanceId, peer);
    }

    @Override
    public List<Reaped> reapStaleInstances(long timeoutNs, long graceNs) {
        return contexts.reapStale(timeoutNs, graceNs);
    }

    @Override
    public int trackedInstanceCount() {
        return contexts.count();
    }

    /** Engine-driven state is reservations in our own pool, no native mapping: it is given back inline. */
    @Override
    public void dropInstanceState(long instanceId) {
        EngineDrivenContext context = contexts.takeReaped(instanceId);
        if (context != null) {
            release(context, Gone.REAPED);
        }
    }

    /** Releases everything (shutdown). */
    public void close() {
        contexts.drainAll().forEach(context -> release(context, Gone.SHUTDOWN));
    }
}
