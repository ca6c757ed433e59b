package io.lmcache.server.loop;

import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;

/** The business side of the server: answers one decoded request. */
@FunctionalInterface
public interface RequestHandler {
    /** Must return a reply; an exception is logged and answered with the operation's failure value. */
    Reply handle(Request request, PeerId peer) throws Exception;
}
