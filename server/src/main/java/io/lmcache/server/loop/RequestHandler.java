package io.lmcache.server.loop;

import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;

/** Answers one decoded request of one op (an {@link OpEntry.Handled}'s handler). */
@FunctionalInterface
public interface RequestHandler<R extends Request> {
    /** Must return a reply; an exception is logged and answered with the operation's failure value. */
    Reply handle(R request, PeerId peer) throws Exception;

    /**
     * As {@link #handle(Request, PeerId)}, for an op that may answer with several frames: {@code partials} queues the
     * frames before the returned last one (the dispatcher passes every handler one; most ignore it).
     */
    default Reply handle(R request, PeerId peer, ReplyChannel partials) throws Exception {
        return handle(request, peer);
    }
}
