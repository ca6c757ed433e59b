package io.lmcache.server.module;

import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.loop.HandlerKind;
import io.lmcache.server.loop.OpTable;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.RequestDecoder;

/** The ops of the engine-driven transfer mode (the worker copies into server-provided slots), as {@link EngineDrivenTransferModule} serves them. */
public final class EngineDrivenOps {
    private EngineDrivenOps() {}

    /**
     * Declares the mode's ops on {@code ops}: {@code builder.module(module)} when the mode is on,
     * {@code builder.disabled("engine_driven")} when {@code --supported-transfer-mode} leaves it out.
     */
    public static void declare(OpTable.ModuleOps<EngineDrivenTransferModule> ops) {
        // runs on: lmcache-request-loop (SYNC: register, unregister) or lmcache-normal-* (NORMAL: prepare, commit)
        ops.op(Op.REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT, HandlerKind.SYNC, RequestDecoder::registerEngineDrivenContext,
                EngineDrivenTransferModule::register, FailureReplies.NO_POOL);
        ops.op(Op.UNREGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT, HandlerKind.SYNC, RequestDecoder::unregisterEngineDrivenContext,
                (m, r, peer) -> m.unregister(r), Reply.NONE);
        ops.op(Op.PREPARE_STORE, HandlerKind.NORMAL, RequestDecoder::prepareStore, EngineDrivenTransferModule::prepareStore,
                FailureReplies.NO_SLOTS);
        ops.op(Op.COMMIT_STORE, HandlerKind.NORMAL, RequestDecoder::commitStore, EngineDrivenTransferModule::commitStore, Reply.FALSE);
        ops.op(Op.PREPARE_RETRIEVE, HandlerKind.NORMAL, RequestDecoder::prepareRetrieve, EngineDrivenTransferModule::prepareRetrieve,
                FailureReplies.RETRIEVE_MISS);
        ops.op(Op.COMMIT_RETRIEVE, HandlerKind.NORMAL, RequestDecoder::commitRetrieve, EngineDrivenTransferModule::commitRetrieve,
                Reply.FALSE);
    }
}
