package io.lmcache.server.loop;

import io.lmcache.server.protocol.Request;

/**
 * Opens a streaming reply ({@link OpEntry.Streamed}): many replies to one request under its uid and op, then a final reply
 * without payload. The handler owns {@code target} from then on; it runs on the socket thread and must not block.
 */
@FunctionalInterface
public interface StreamHandler<R extends Request> {
    void open(R request, StreamTarget target);
}
