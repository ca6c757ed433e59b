package io.lmcache.server.module;

import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.loop.PeerId;
import io.lmcache.server.loop.RequestHandler;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import java.util.EnumSet;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Routes each decoded request to the module that owns its operation. A transfer module that
 * {@code --supported-transfer-mode} leaves out is null: its operations get their failure value and
 * one warning.
 */
public final class RequestHandlers implements RequestHandler {
    private static final Logger LOG = LoggerFactory.getLogger(RequestHandlers.class);

    private final ManagementModule management;
    private final LookupModule lookup;
    private final LmcacheDrivenTransferModule lmcacheDriven;
    private final EngineDrivenTransferModule engineDriven;
    private final FailureReplies failures;
    private final Set<Op> warnedDisabled = EnumSet.noneOf(Op.class);

    public RequestHandlers(ManagementModule management, LookupModule lookup, LmcacheDrivenTransferModule lmcacheDriven,
            EngineDrivenTransferModule engineDriven, FailureReplies failures) {
        this.management = management;
        this.lookup = lookup;
        this.lmcacheDriven = lmcacheDriven;
        this.engineDriven = engineDriven;
        this.failures = failures;
    }

    @Override
    public Reply handle(Request request, PeerId peer) {
        return switch (request) {
            case Request.GetChunkSize r -> management.getChunkSize();
            case Request.GetExperimental r -> management.getExperimental();
            case Request.Noop r -> management.noop();
            case Request.Ping r -> management.ping(r, peer);
            case Request.Clear r -> management.clear(r);
            case Request.ReportBlockAllocation r -> management.reportBlockAllocation(r);
            case Request.Lookup r -> lookup.lookup(r);
            case Request.QueryPrefetchStatus r -> lookup.query(r.requestId());
            case Request.QueryPrefetchLookupHits r -> lookup.peekHits(r.requestId());
            case Request.WaitPrefetchStatus r -> lookup.query(r.requestId());
            case Request.FreeLookupLocks r -> lookup.freeLookupLocks(r);
            case Request.EndSession r -> lookup.endSession(r);
            case Request.RegisterKvCache r -> lmcacheDriven == null ? disabled(r, "lmcache_driven") : lmcacheDriven.register(r, peer);
            case Request.UnregisterKvCache r -> lmcacheDriven == null ? disabled(r, "lmcache_driven") : lmcacheDriven.unregister(r);
            case Request.Store r -> lmcacheDriven == null ? disabled(r, "lmcache_driven") : lmcacheDriven.store(r, peer);
            case Request.Retrieve r -> lmcacheDriven == null ? disabled(r, "lmcache_driven") : lmcacheDriven.retrieve(r, peer);
            case Request.RegisterEngineDrivenContext r -> engineDriven == null ? disabled(r, "engine_driven") : engineDriven.register(r, peer);
            case Request.UnregisterEngineDrivenContext r -> engineDriven == null ? disabled(r, "engine_driven") : engineDriven.unregister(r);
            case Request.PrepareStore r -> engineDriven == null ? disabled(r, "engine_driven") : engineDriven.prepareStore(r, peer);
            case Request.CommitStore r -> engineDriven == null ? disabled(r, "engine_driven") : engineDriven.commitStore(r, peer);
            case Request.PrepareRetrieve r -> engineDriven == null ? disabled(r, "engine_driven") : engineDriven.prepareRetrieve(r, peer);
            case Request.CommitRetrieve r -> engineDriven == null ? disabled(r, "engine_driven") : engineDriven.commitRetrieve(r, peer);
            case Request.Unsupported r -> throw new IllegalStateException("unsupported ops never reach the handlers");
        };
    }

    private Reply disabled(Request request, String mode) {
        boolean first;
        synchronized (warnedDisabled) {
            first = warnedDisabled.add(request.op());
        }
        if (first) {
            LOG.warn("{} needs {} transfers, which --supported-transfer-mode leaves out; answering with its failure value"
                    + " (further ones are not logged)", request.op().wireName(), mode);
        }
        return failures.forOp(request.op());
    }
}
