package io.lmcache.server.loop;

import io.lmcache.server.protocol.Reply;

/**
 * The intermediate replies of a request answered with several frames under its uid (LMCache's {@code HandlerType.STREAMING},
 * {@code lmcache/v1/multiprocess/mq_streaming.py}: each call of the handler's {@code response_channel} queues
 * {@code [identity, uid, op, msgpack(response)]}; the handler's return value is the last frame). They go through the same
 * reply queue and per-peer byte share as every other reply, so a peer that does not read loses them like any reply.
 */
@FunctionalInterface
public interface ReplyChannel {
    /** For handlers of one-frame ops: refuses every intermediate frame. */
    ReplyChannel NONE = partial -> false;

    /** Queues one intermediate frame; false when it was not queued (the reply queue is over its budget, or no channel). */
    boolean send(Reply partial);
}
