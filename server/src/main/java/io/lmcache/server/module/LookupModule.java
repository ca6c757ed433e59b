package io.lmcache.server.module;

import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;

/** Prefix lookups and their lifecycle: LOOKUP, QUERY_PREFETCH_STATUS, FREE_LOOKUP_LOCKS, END_SESSION. */
public final class LookupModule {
    private static final Reply ZERO = new Reply.Int(0);

    public Reply lookup(Request.Lookup request) {
        return Reply.NONE;
    }

    public Reply query(String requestId) {
        return ZERO;
    }

    public Reply freeLookupLocks(Request.FreeLookupLocks request) {
        return Reply.NONE;
    }

    public Reply endSession(Request.EndSession request) {
        return Reply.NONE;
    }
}
