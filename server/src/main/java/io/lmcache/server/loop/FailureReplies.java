package io.lmcache.server.loop;

import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.RequestDecoder;
import java.util.List;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The in-band failure values shared by several ops or modules (protocol doc §11): what a client
 * waiting on a request gets when it cannot be served, never silence. Each op's own value is declared
 * with it in the {@link OpTable}.
 *
 * <p>STORE and RETRIEVE fail with {@code (event, false)}, and a GPU worker opens that event
 * ({@code Event.from_ipc_handle}) before it looks at the flag: 64 zero bytes make the open raise,
 * which takes vLLM down (protocol doc §9). So on a CUDA host their failure value comes from an
 * instance of this class built with the GPU backend's complete event ({@link #withEvents}); every
 * path that answers them without a handler's reply (undecodable request, handler exception,
 * rejected during shutdown, disabled transfer mode) goes through {@link #transferFailure()}.
 */
public final class FailureReplies {
    private static final Logger LOG = LoggerFactory.getLogger(FailureReplies.class);
    private static final byte[] ZERO_EVENT = new byte[RequestDecoder.EVENT_HANDLE_BYTES];
    /** STORE, RETRIEVE of a CPU worker (which ignores the handle), or when CUDA cannot make an event: {@code (zero event, false)}. */
    public static final Reply TRANSFER_FAILED = new Reply.Transfer(ZERO_EVENT, false);
    /** PREPARE_STORE: an empty slot list, never a context without one (that would switch the worker to pickle mode). */
    public static final Reply NO_SLOTS = new Reply.PrepareStore(List.of(), new int[0]);
    /** PREPARE_RETRIEVE: a miss. */
    public static final Reply RETRIEVE_MISS = new Reply.PrepareRetrieve(false, List.of());
    /** REGISTER_KV_CACHE_ENGINE_DRIVEN_CONTEXT: no pool. */
    public static final Reply NO_POOL = new Reply.EnginePool("", 0);
    /** The prefetch queries: no hits. */
    public static final Reply ZERO = new Reply.Int(0);
    private static final FailureReplies HOST_ONLY = new FailureReplies(null);

    /** Where a STORE/RETRIEVE failure's event comes from: the GPU backend's {@code failureEvent}. */
    @FunctionalInterface
    public interface EventSource {
        /**
         * The handle of a recorded, complete interprocess event on the GPU with this UUID, or on the
         * first GPU when it is null (the request's GPU is not known); may throw when CUDA fails.
         */
        byte[] failureEvent(String deviceUuid);
    }

    private final EventSource events;
    private final RateLimitedLog eventErrors = new RateLimitedLog(LOG, 1);

    private FailureReplies(EventSource events) {
        this.events = events;
    }

    /** A server without CUDA: STORE/RETRIEVE fail with {@link #TRANSFER_FAILED}. */
    public static FailureReplies hostOnly() {
        return HOST_ONLY;
    }

    /** STORE/RETRIEVE fail with an event from {@code events} (the GPU backend's, made once per GPU). */
    public static FailureReplies withEvents(EventSource events) {
        return new FailureReplies(Objects.requireNonNull(events));
    }

    /** STORE, RETRIEVE: {@code (zero event, false)}, for a CPU worker's transfer. */
    public static Reply transferFailed() {
        return TRANSFER_FAILED;
    }

    /**
     * STORE, RETRIEVE failing before the request's GPU is known: {@code (the first GPU's complete
     * event, false)}; {@link #TRANSFER_FAILED} without CUDA, or when CUDA cannot make the event.
     * Never throws: the dispatcher answers with it from its own failure paths.
     */
    public Reply transferFailure() {
        if (events == null) {
            return TRANSFER_FAILED;
        }
        try {
            byte[] handle = events.failureEvent(null);
            if (handle != null && handle.length == RequestDecoder.EVENT_HANDLE_BYTES) {
                return new Reply.Transfer(handle, false);
            }
            eventErrors.warn("the GPU backend gave a failure event of {} bytes; answering with 64 zero bytes",
                    handle == null ? "no" : handle.length);
        } catch (RuntimeException e) {
            eventErrors.warn("cannot make a failure event on the GPU ({}); answering with 64 zero bytes, which a GPU worker cannot open",
                    e.toString());
        }
        return TRANSFER_FAILED;
    }
}
