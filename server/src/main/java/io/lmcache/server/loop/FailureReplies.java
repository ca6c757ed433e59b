package io.lmcache.server.loop;

import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.RequestDecoder;
import java.util.List;

/**
 * The in-band failure values shared by several ops or modules (protocol doc §11): what a client
 * waiting on a request gets when it cannot be served, never silence. Each op's own value is declared
 * with it in the {@link OpTable}.
 */
public final class FailureReplies {
    private static final byte[] ZERO_EVENT = new byte[RequestDecoder.EVENT_HANDLE_BYTES];
    /** STORE, RETRIEVE: {@code (zero event, false)}. */
    public static final Reply TRANSFER_FAILED = new Reply.Transfer(ZERO_EVENT, false);
    /** PREPARE_STORE: an empty slot list, never a context without one (that would switch the worker to pickle mode). */
    public static final Reply NO_SLOTS = new Reply.PrepareStore(List.of(), new int[0]);
    /** PREPARE_RETRIEVE: a miss. */
    public static final Reply RETRIEVE_MISS = new Reply.PrepareRetrieve(false, List.of());
    /** REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT: no pool. */
    public static final Reply NO_POOL = new Reply.EnginePool("", 0);
    /** The prefetch queries: no hits. */
    public static final Reply ZERO = new Reply.Int(0);

    private FailureReplies() {}

    public static Reply transferFailed() {
        return TRANSFER_FAILED;
    }
}
