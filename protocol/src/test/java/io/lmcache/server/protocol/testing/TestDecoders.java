package io.lmcache.server.protocol.testing;

import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.ProtocolException;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestDecoder;
import io.lmcache.server.protocol.RequestDecoder.PayloadDecoder;

/**
 * Tests' way to decode a captured request by its op (the server finds the decoder in its op table).
 * The switch is exhaustive, with no default: a new op fails to compile here until it is listed.
 */
public final class TestDecoders {
    private TestDecoders() {}

    /** The op's decoder; null for an op the server does not decode (an unsupported feature). */
    public static PayloadDecoder<? extends Request> of(Op op) {
        return switch (op) {
            case GET_CHUNK_SIZE -> RequestDecoder::getChunkSize;
            case GET_EXPERIMENTAL -> RequestDecoder::getExperimental;
            case NOOP -> RequestDecoder::noop;
            case PING -> RequestDecoder::ping;
            case CLEAR -> RequestDecoder::clear;
            case REPORT_BLOCK_ALLOCATION -> RequestDecoder::reportBlockAllocation;
            case LOOKUP -> RequestDecoder::lookup;
            case QUERY_PREFETCH_STATUS -> RequestDecoder::queryPrefetchStatus;
            case QUERY_PREFETCH_LOOKUP_HITS -> RequestDecoder::queryPrefetchLookupHits;
            case WAIT_PREFETCH_STATUS -> RequestDecoder::waitPrefetchStatus;
            case FREE_LOOKUP_LOCKS -> RequestDecoder::freeLookupLocks;
            case END_SESSION -> RequestDecoder::endSession;
            case REGISTER_KV_CACHE -> RequestDecoder::registerKvCache;
            case UNREGISTER_KV_CACHE -> RequestDecoder::unregisterKvCache;
            case STORE -> RequestDecoder::store;
            case RETRIEVE -> RequestDecoder::retrieve;
            case RETRIEVE_LAYERWISE -> RequestDecoder::retrieveLayerwise;
            case REGISTER_LAYERWISE_IPC_EVENT_POOL -> RequestDecoder::registerLayerwiseEventPool;
            case REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT -> RequestDecoder::registerEngineDrivenContext;
            case UNREGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT -> RequestDecoder::unregisterEngineDrivenContext;
            case PREPARE_STORE -> RequestDecoder::prepareStore;
            case COMMIT_STORE -> RequestDecoder::commitStore;
            case PREPARE_RETRIEVE -> RequestDecoder::prepareRetrieve;
            case COMMIT_RETRIEVE -> RequestDecoder::commitRetrieve;
            case POLL_KV_EVENTS -> RequestDecoder::pollKvEvents;
            case SUBSCRIBE_KV_EVENTS -> RequestDecoder::subscribeKvEvents;
            case REGISTER_Q_CACHE, UNREGISTER_Q_CACHE, STORE_Q, CB_REGISTER_ROPE, CB_UNREGISTER_ROPE, CB_RETRIEVE_PRE_COMPUTED,
                    CB_UNIFIED_LOOKUP, CB_PROTOCOL_HANDSHAKE, P2P_LOOKUP_AND_LOCK, P2P_QUERY_LOOKUP_RESULTS, P2P_UNLOCK_OBJECTS -> null;
        };
    }

    /** Decodes {@code frames[from..to)} as a request of {@code op}. */
    public static Request decode(RequestDecoder decoder, Op op, byte[][] frames, int from, int to) throws ProtocolException {
        PayloadDecoder<? extends Request> d = of(op);
        if (d == null) {
            throw new IllegalArgumentException(op.wireName() + " is not decoded by this server");
        }
        return d.decode(decoder, frames, from, to);
    }
}
