package io.lmcache.server.loop;

import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;

/** Answers one decoded request of one op (an {@link OpEntry.Handled}'s handler). */
@FunctionalInterface
public interface RequestHandler<R extends Request> {
    /** Must return a reply; an exception is logged and answered with the operation's failure value. */
    Reply handle(R request, PeerId peer) throws Exception;
}
