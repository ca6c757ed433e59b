package io.lmcache.server.module;

import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.loop.PeerId;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** LMCache-driven transfers: the worker registers its KV tensors and the server copies (STORE, RETRIEVE). */
public final class LmcacheDrivenTransferModule {
    private static final Logger LOG = LoggerFactory.getLogger(LmcacheDrivenTransferModule.class);

    private final Map<Long, Request.RegisterKvCache> instances = new ConcurrentHashMap<>();

    public Reply register(Request.RegisterKvCache request, PeerId peer) {
        Request.RegisterKvCache previous = instances.putIfAbsent(request.instanceId(), request);
        if (previous == null) {
            LOG.info("registered instance {} ({} tensor(s), model {}, world size {}) from peer {}", request.instanceId(),
                    request.kvCaches().size(), request.modelName(), request.worldSize(), peer);
        } else {
            LOG.debug("instance {} registered again: kept", request.instanceId());
        }
        return Reply.NONE;
    }

    public Reply unregister(Request.UnregisterKvCache request) {
        if (instances.remove(request.instanceId()) == null) {
            LOG.warn("UNREGISTER of unknown instance {}", request.instanceId());
        } else {
            LOG.info("unregistered instance {}", request.instanceId());
        }
        return Reply.NONE;
    }

    public Reply store(Request.Store request, PeerId peer) {
        return FailureReplies.transferFailed();
    }

    public Reply retrieve(Request.Retrieve request, PeerId peer) {
        return FailureReplies.transferFailed();
    }

    public int registeredInstances() {
        return instances.size();
    }
}
