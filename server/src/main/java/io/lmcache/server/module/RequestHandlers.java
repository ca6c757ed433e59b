package io.lmcache.server.module;

import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.loop.PeerId;
import io.lmcache.server.loop.RequestHandler;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;

/** Routes each decoded request to the module that owns its operation. */
public final class RequestHandlers implements RequestHandler {
    private final ManagementModule management;
    private final LookupModule lookup;
    private final LmcacheDrivenTransferModule lmcacheDriven;
    private final FailureReplies failures;

    public RequestHandlers(ManagementModule management, LookupModule lookup, LmcacheDrivenTransferModule lmcacheDriven,
            FailureReplies failures) {
        this.management = management;
        this.lookup = lookup;
        this.lmcacheDriven = lmcacheDriven;
        this.failures = failures;
    }

    @Override
    public Reply handle(Request request, PeerId peer) {
        return switch (request) {
            case Request.GetChunkSize r -> management.getChunkSize();
            case Request.GetExperimental r -> management.getExperimental();
            case Request.Noop r -> management.noop();
            case Request.Ping r -> management.ping(r);
            case Request.Clear r -> management.clear(r);
            case Request.ReportBlockAllocation r -> management.reportBlockAllocation(r);
            case Request.RegisterKvCache r -> lmcacheDriven.register(r, peer);
            case Request.UnregisterKvCache r -> lmcacheDriven.unregister(r);
            case Request.Store r -> lmcacheDriven.store(r, peer);
            case Request.Retrieve r -> lmcacheDriven.retrieve(r, peer);
            case Request.Lookup r -> lookup.lookup(r);
            case Request.QueryPrefetchStatus r -> lookup.query(r.requestId());
            case Request.QueryPrefetchLookupHits r -> lookup.peekHits(r.requestId());
            case Request.WaitPrefetchStatus r -> lookup.query(r.requestId());
            case Request.FreeLookupLocks r -> lookup.freeLookupLocks(r);
            case Request.EndSession r -> lookup.endSession(r);
            case Request.RegisterEngineDrivenContext r -> failures.forOp(r.op());
            case Request.UnregisterEngineDrivenContext r -> failures.forOp(r.op());
            case Request.PrepareStore r -> failures.forOp(r.op());
            case Request.CommitStore r -> failures.forOp(r.op());
            case Request.PrepareRetrieve r -> failures.forOp(r.op());
            case Request.CommitRetrieve r -> failures.forOp(r.op());
            case Request.Unsupported r -> throw new IllegalStateException("unsupported ops never reach the handlers");
        };
    }
}
