package io.lmcache.server.module;

import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.loop.HandlerKind;
import io.lmcache.server.loop.OpTable;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.RequestDecoder;

/** The ops of the lmcache-driven transfer mode (the server copies the KV blocks), as {@link LmcacheDrivenTransferModule} serves them. */
public final class LmcacheDrivenOps {
    private LmcacheDrivenOps() {}

    /**
     * Declares the mode's ops on {@code ops}: {@code builder.module(module)} when the mode is on,
     * {@code builder.disabled("lmcache_driven")} when {@code --supported-transfer-mode} leaves it out.
     * Every op of one worker runs in order on its transfer lane; REGISTER too, because opening CUDA IPC
     * handles can block in the driver, which must never happen on the socket thread. STORE and
     * RETRIEVE fail with {@code failures}' event, which a GPU worker can open (protocol doc §9).
     */
    public static void declare(OpTable.ModuleOps<LmcacheDrivenTransferModule> ops, EventKinds events) {
        FailureReplies failures = events.failures();
        // runs on: lmcache-transfer-* (AFFINITY: the worker's lane), every handler and failure value below; a registration still
        // running at the lanes' deadline is answered with its failure value (a late return is not answered again)
        ops.registration(Op.REGISTER_KV_CACHE, RequestDecoder::registerKvCache, LmcacheDrivenTransferModule::register, Reply.NONE);
        ops.registration(Op.UNREGISTER_KV_CACHE, RequestDecoder::unregisterKvCache, (m, r, peer) -> m.unregister(r), Reply.NONE);
        // every event handle is classified first and the reply's event is in the request's format (EventKinds: isolated IPC)
        ops.op(Op.STORE, HandlerKind.AFFINITY, RequestDecoder::store,
                (m, r, peer) -> events.serve("store", r.eventHandle(), () -> m.store(r, peer)), failures::transferFailure);
        ops.op(Op.RETRIEVE, HandlerKind.AFFINITY, RequestDecoder::retrieve,
                (m, r, peer) -> events.serve("retrieve", r.eventHandle(), () -> m.retrieve(r, peer)), failures::transferFailure);
        // vLLM's layer-wise connector (--layerwise-batch; docs/sglang.md): the pool on the worker's lane (making it may block in
        // the driver), RETRIEVE_LAYERWISE's batch frames queued as its copies are enqueued, then its last frame; never left waiting
        ops.registration(Op.REGISTER_LAYERWISE_IPC_EVENT_POOL, RequestDecoder::registerLayerwiseEventPool,
                LmcacheDrivenTransferModule::registerLayerwiseEventPool, LmcacheDrivenTransferModule.LAYERWISE_OFF);
        ops.partialsOp(Op.RETRIEVE_LAYERWISE, HandlerKind.AFFINITY, RequestDecoder::retrieveLayerwise,
                LmcacheDrivenTransferModule::retrieveLayerwise, LmcacheDrivenTransferModule.LAYERWISE_MISS);
    }
}
