package io.lmcache.server.module;

import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.storage.ObjectStore;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Handshake, health and housekeeping: GET_CHUNK_SIZE, GET_EXPERIMENTAL, NOOP, PING, CLEAR, REPORT_BLOCK_ALLOCATION. */
public final class ManagementModule {
    private static final Logger LOG = LoggerFactory.getLogger(ManagementModule.class);
    private static final Reply OK = new Reply.Str("OK");
    private static final Reply NO_EXPERIMENTS = new Reply.StrList(List.of());

    private final Reply chunkSize;
    private final ObjectStore store;

    public ManagementModule(int chunkSize, ObjectStore store) {
        this.chunkSize = new Reply.Int(chunkSize);
        this.store = store;
    }

    public Reply getChunkSize() {
        return chunkSize;
    }

    public Reply getExperimental() {
        return NO_EXPERIMENTS;
    }

    public Reply noop() {
        return OK;
    }

    /** Always true: a false or late answer sends the client into degraded mode. */
    public Reply ping(Request.Ping ping) {
        return Reply.TRUE;
    }

    /** Empties L1; objects in use stay unless forced (then they go as soon as their copy ends). */
    public Reply clear(Request.Clear clear) {
        ObjectStore.ClearResult result = store.clear(clear.force());
        LOG.info("CLEAR (force={}): removed {} object(s), {} MiB{}", clear.force(), result.removed(), result.bytes() >> 20,
                result.deferred() > 0 ? ", " + result.deferred() + " in use go when released" : "");
        return Reply.NONE;
    }

    public Reply reportBlockAllocation(Request.ReportBlockAllocation report) {
        if (LOG.isDebugEnabled()) {
            LOG.debug("block allocation report from {} ({}): {} record(s)", report.instanceId(), report.modelName(), report.records().size());
        }
        return Reply.NONE;
    }
}
