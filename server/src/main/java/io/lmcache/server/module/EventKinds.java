package io.lmcache.server.module;

import io.lmcache.server.cuda.GpuBackend;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.loop.FailureReplies;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.metrics.TransferCatalogue;
import io.lmcache.server.protocol.EventHandle;
import io.lmcache.server.protocol.Reply;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Which event backend each STORE/RETRIEVE speaks, and answering it in kind (newest-clients.md §2.5): nothing on the wire
 * negotiates LMCache's isolated IPC, and a worker that gets the other format back, or no reply, fails or waits for ever. So
 * every handle is classified by its length and version byte ({@link EventHandle}); a malformed one is refused with a reply
 * and a counter, without reaching the copy; a request whose kind contradicts {@code --isolated-ipc} is served, counted and
 * warned about (a mixed fleet works from one server). The copy engine answers a timeline request with a timeline payload;
 * what is left here is the failure replies, whose always-complete CUDA event becomes the complete timeline event of this
 * server's semaphore buffer (the worker opens that buffer even for sequence 0, so the handle must be real).
 */
public final class EventKinds {
    private static final Logger LOG = LoggerFactory.getLogger(EventKinds.class);
    // a peer can cause each of these once per message: rate-limited
    private static final RateLimitedLog MALFORMED = new RateLimitedLog(LOG, "malformed event handles", 10);
    private static final RateLimitedLog MISMATCH = new RateLimitedLog(LOG, "event kind contradicting --isolated-ipc", 1);
    private static final RateLimitedLog NO_EVENT = new RateLimitedLog(LOG, "timeline failure events not made", 10);

    private final GpuBackend gpu;
    private final FailureReplies failures;
    private final ServerMetrics metrics;
    private final boolean isolatedIpc;

    /**
     * @param gpu where a timeline failure reply's complete event comes from
     * @param failures the CUDA-event failure replies
     * @param metrics where malformed handles and mismatches are counted
     * @param isolatedIpc {@code --isolated-ipc}: which kind is expected (only the warning depends on it)
     */
    public EventKinds(GpuBackend gpu, FailureReplies failures, ServerMetrics metrics, boolean isolatedIpc) {
        this.gpu = gpu;
        this.failures = failures;
        this.metrics = metrics;
        this.isolatedIpc = isolatedIpc;
    }

    /**
     * Serves one STORE/RETRIEVE whose request carried {@code raw}: refused in kind when it is malformed, else {@code transfer}'s
     * reply with its event in the request's format. A timeline request whose handler throws still gets a timeline failure
     * reply (the dispatcher's own failure value is a CUDA event, which that worker cannot read); a CUDA-event request's
     * exception goes on to the dispatcher, which counts and answers it.
     */
    public Reply serve(String op, byte[] raw, Supplier<Reply> transfer) {
        EventHandle kind = EventHandle.classify(raw);
        if (kind instanceof EventHandle.Malformed bad) {
            metrics.increment(TransferCatalogue.MALFORMED_EVENT_HANDLES, op);
            MALFORMED.warn("{} refused: {}", op.toUpperCase(), bad.reason());
            return failure(bad.timelineFormat());
        }
        noteMismatch(kind);
        if (!kind.timelineFormat()) {
            return transfer.get();
        }
        Reply reply;
        try {
            reply = transfer.get();
        } catch (RuntimeException e) {
            MALFORMED.warn("{} of an isolated-IPC worker failed: {}", op.toUpperCase(), e.toString());
            return failure(true);
        }
        if (reply instanceof Reply.Transfer(byte[] event, boolean ok) && event.length != EventHandle.TIMELINE_BYTES) {
            // a failure reply's event is an always-complete one: its timeline counterpart is slot 0, sequence 0
            return new Reply.Transfer(completeTimeline(), ok);
        }
        return reply;
    }

    private void noteMismatch(EventHandle kind) {
        String seen = switch (kind) {
            case EventHandle.Timeline timeline -> isolatedIpc ? null : "timeline";
            case EventHandle.CudaEvent event -> isolatedIpc && !event.none() ? "cuda_event" : null;
            default -> null;
        };
        if (seen != null) {
            metrics.increment(TransferCatalogue.EVENT_KIND_MISMATCHES, seen);
            MISMATCH.warn("a worker sent a {} event while the server runs {}: served in kind; check lmcache.mp.isolated_ipc against"
                    + " the server's flag", seen, isolatedIpc ? "--isolated-ipc" : "without --isolated-ipc");
        }
    }

    /** The CUDA-event failure replies (the dispatcher's failure value for STORE/RETRIEVE). */
    public FailureReplies failures() {
        return failures;
    }

    /** The failure reply in one format: never throws. */
    Reply failure(boolean timeline) {
        return timeline ? new Reply.Transfer(completeTimeline(), false) : failures.transferFailure();
    }

    private byte[] completeTimeline() {
        try {
            return gpu.completeTimelineEvent(null);
        } catch (RuntimeException e) {
            NO_EVENT.error("cannot make a complete timeline-semaphore event: {}", e.toString());
            return EventHandle.Timeline.complete(new byte[EventHandle.MEM_HANDLE_BYTES]).encode();
        }
    }
}
