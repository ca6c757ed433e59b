package io.lmcache.server.loop;

import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestDecoder.PayloadDecoder;
import java.util.function.Supplier;

/** What the server does with one op: one entry per {@link Op} in the {@link OpTable}. */
public sealed interface OpEntry {

    Op op();

    /**
     * An op this server serves.
     *
     * @param kind where the handler runs
     * @param decoder reads the payload frames into the op's request record
     * @param handler answers the request; an exception is answered with {@code failure}
     * @param failure what the waiting client gets when the request cannot be served (protocol doc §11),
     *     asked for each such request (STORE/RETRIEVE's comes from the GPU backend); never throws
     * @param answeredAtDeadline a registration ({@link OpTable.Builder#registration}): on a peer's transfer lane, its reply
     *     promises nothing the server must have done, so one still running at the lanes' deadline ({@link LaneStallWatch})
     *     is answered with {@code failure} and the peer's later requests go on without it. Opening CUDA IPC handles can block
     *     in the driver, and a worker waits 300 s for its REGISTER, then vLLM fails to start; a STORE's or RETRIEVE's reply
     *     must follow its copy. Read only by the deadline: a branch on it in the request path, never taken by the warm-up,
     *     would throw that path's compiled code away at the first REGISTER.
     */
    record Handled<R extends Request>(Op op, HandlerKind kind, PayloadDecoder<R> decoder, RequestHandler<? super R> handler,
            Supplier<Reply> failure, boolean answeredAtDeadline) implements OpEntry {
        /** An op that is not a registration. */
        public Handled(Op op, HandlerKind kind, PayloadDecoder<R> decoder, RequestHandler<? super R> handler, Supplier<Reply> failure) {
            this(op, kind, decoder, handler, failure, false);
        }

        /** The most payload frames any client version sends ({@link Op#maxPayloads}); more are counted and ignored. */
        public int maxPayloads() {
            return op.maxPayloads();
        }
    }

    /**
     * An op of a feature this server does not provide: counted, warned about once, never answered (the
     * client then treats the feature as unavailable).
     *
     * @param feature the feature's name, for the warning
     */
    record Unsupported(Op op, String feature) implements OpEntry {}

    /**
     * An op answered with a stream of replies (kv-events.md §8): decoded on the socket thread and handed to {@code handler},
     * which sends the replies itself; a request that cannot be decoded gets the final reply at once.
     */
    record Streamed<R extends Request>(Op op, PayloadDecoder<R> decoder, StreamHandler<? super R> handler) implements OpEntry {
        /** The most payload frames read ({@link Op#maxPayloads}). */
        public int maxPayloads() {
            return op.maxPayloads();
        }
    }
}
