package io.lmcache.server.module;

import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.loop.OpTable;
import io.lmcache.server.protocol.Op;
import java.util.Optional;

/** The server's op table: every module's declarations, and the one list of ops this server does not serve. */
public final class ServerOps {
    private ServerOps() {}

    /**
     * Builds the table; throws (start-up fails) when an op has no entry.
     *
     * @param lmcacheDriven empty when {@code --supported-transfer-mode} leaves the mode out (its ops answered as disabled)
     * @param engineDriven empty when {@code --supported-transfer-mode} leaves the mode out
     * @param events how STORE/RETRIEVE events are read and answered in kind, and where their failures get their event
     *     ({@link FailureReplies#withEvents} with the GPU backend, so that a GPU worker can open it; {@link FailureReplies#hostOnly()}
     *     on a server without CUDA)
     */
    public static OpTable table(ManagementModule management, LookupModule lookup, KvEventModule kvEvents,
            Optional<LmcacheDrivenTransferModule> lmcacheDriven, Optional<EngineDrivenTransferModule> engineDriven, EventKinds events) {
        OpTable.Builder ops = OpTable.builder();
        management.declareOps(ops);
        lookup.declareOps(ops);
        kvEvents.declareOps(ops);
        LmcacheDrivenOps.declare(lmcacheDriven.map(ops::module).orElseGet(() -> ops.disabled("lmcache_driven")), events);
        EngineDrivenOps.declare(engineDriven.map(ops::module).orElseGet(() -> ops.disabled("engine_driven")));
        declareUnsupported(ops);
        return ops.build();
    }

    /** Known ops of features this server does not provide: no reply, so the client treats the feature as unavailable. */
    public static void declareUnsupported(OpTable.Builder ops) {
        ops.unsupported("Q cache", Op.REGISTER_Q_CACHE, Op.UNREGISTER_Q_CACHE, Op.STORE_Q);
        ops.unsupported("CacheBlend", Op.CB_REGISTER_ROPE, Op.CB_UNREGISTER_ROPE, Op.CB_RETRIEVE_PRE_COMPUTED, Op.CB_UNIFIED_LOOKUP,
                Op.CB_PROTOCOL_HANDSHAKE);
        ops.unsupported("P2P", Op.P2P_LOOKUP_AND_LOCK, Op.P2P_QUERY_LOOKUP_RESULTS, Op.P2P_UNLOCK_OBJECTS);
    }
}
