package io.lmcache.server.loop;

import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.RequestDecoder;
import java.util.List;

/**
 * What a client waiting on each operation gets when its request cannot be served: the in-band
 * failure value it understands (protocol doc §11), never silence.
 */
public final class FailureReplies {
    private static final byte[] ZERO_EVENT = new byte[RequestDecoder.EVENT_HANDLE_BYTES];
    private static final Reply TRANSFER_FAILED = new Reply.Transfer(ZERO_EVENT, false);
    private static final Reply NO_SLOTS = new Reply.PrepareStore(List.of(), new int[0]);
    private static final Reply RETRIEVE_MISS = new Reply.PrepareRetrieve(false, List.of());
    private static final Reply NO_POOL = new Reply.EnginePool("", 0);
    private static final Reply ZERO = new Reply.Int(0);
    private static final Reply NO_EXPERIMENTS = new Reply.StrList(List.of());
    private static final Reply OK = new Reply.Str("OK");

    private final Reply chunkSize;

    public FailureReplies(int chunkSize) {
        this.chunkSize = new Reply.Int(chunkSize);
    }

    public static Reply transferFailed() {
        return TRANSFER_FAILED;
    }

    public Reply forOp(Op op) {
        return switch (op) {
            case STORE, RETRIEVE -> TRANSFER_FAILED;
            case QUERY_PREFETCH_STATUS, QUERY_PREFETCH_LOOKUP_HITS, WAIT_PREFETCH_STATUS -> ZERO;
            case PING -> Reply.TRUE;
            case GET_CHUNK_SIZE -> chunkSize;
            case GET_EXPERIMENTAL -> NO_EXPERIMENTS;
            case NOOP -> OK;
            case REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT -> NO_POOL;
            // an empty slot list, never a context without one (that would switch the worker to pickle mode)
            case PREPARE_STORE -> NO_SLOTS;
            case PREPARE_RETRIEVE -> RETRIEVE_MISS;
            case COMMIT_STORE, COMMIT_RETRIEVE -> Reply.FALSE;
            default -> Reply.NONE;
        };
    }
}
