package io.lmcache.server.module;

import io.lmcache.server.events.KvEventLog;
import io.lmcache.server.events.KvEventRecorder;
import io.lmcache.server.events.KvEventStreams;
import io.lmcache.server.liveness.InstanceLivenessTarget;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.loop.HandlerKind;
import io.lmcache.server.loop.OpTable;
import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestDecoder;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * LMCache's KV-event channel for KV-aware routers (kv-events.md): {@code poll_kv_events} (op 34 or its name) and the
 * {@code subscribe_kv_events} stream over one log, both advertised through GET_EXPERIMENTAL while the log is on. A liveness
 * target, so PINGs keep a subscription alive and a reaped instance's subscription ends; it reaps no worker itself.
 */
public final class KvEventModule implements InstanceLivenessTarget {
    private static final Logger LOG = LoggerFactory.getLogger(KvEventModule.class);
    private static final RateLimitedLog BAD_POLL = new RateLimitedLog(LOG, "refused KV-event polls", 10);
    /** The streaming era's capability (LMCache's {@code KV_EVENT_CAPABILITY}) and the polling era's (inferred, §10.1). */
    public static final List<String> CAPABILITIES = List.of("kv_event_stream", "kv_events");

    private final KvEventLog log;
    private final KvEventRecorder recorder;
    private final KvEventStreams streams;

    public KvEventModule(KvEventRecorder recorder, KvEventStreams streams) {
        this.log = recorder.log();
        this.recorder = recorder;
        this.streams = streams;
    }

    /** The GET_EXPERIMENTAL capabilities: both names while the log is on, none when it is off. */
    public List<String> capabilities() {
        return log.enabled() ? CAPABILITIES : List.of();
    }

    /**
     * Poll reads up to 1 024 records with their tokens (up to {@link KvEventLog#MAX_REPLY_BYTES} of reply): a thread of its own,
     * never the socket thread nor the CPU pool's LOOKUPs. The subscription is decoded and registered on the socket thread; the
     * stream agent sends its batches.
     */
    public void declareOps(OpTable.Builder ops) {
        // runs on: lmcache-background-* (poll); lmcache-request-loop (subscribe: registration only)
        ops.op(Op.POLL_KV_EVENTS, HandlerKind.BACKGROUND, RequestDecoder::pollKvEvents, (r, peer) -> poll(r), this::pollFailure);
        ops.streamed(Op.SUBSCRIBE_KV_EVENTS, RequestDecoder::subscribeKvEvents, streams::open);
    }

    /** {@code KVEventPollResult} from {@code cursor}; arguments LMCache's handler refuses get the failure value (§10.10). */
    public Reply poll(Request.PollKvEvents poll) {
        if (poll.cursor() < 0 || poll.maxEvents() < 1) {
            BAD_POLL.warn("poll_kv_events with cursor {} and max_events {} refused (cursor >= 0, max_events >= 1)", poll.cursor(),
                    poll.maxEvents());
            return pollFailure();
        }
        // as subscribe's bound, but clamped rather than refused: LMCache's poll takes any max_events >= 1
        return log.read(poll.cursor(), poll.modelName(), (int) Math.min(poll.maxEvents(), KvEventLog.MAX_EVENTS));
    }

    /** A poll that cannot be served: a loss at the newest record, so a worker withdraws what it announced and resumes there. */
    private Reply pollFailure() {
        return log.enabled() ? new Reply.KvEvents(true, log.incarnation(), log.lastSeq(), true, List.of())
                : new Reply.KvEvents(false, log.incarnation(), 0, false, List.of());
    }

    /** {@code /status} {@code kv_events} (kv-events.md §9): only {@code enabled} and {@code incarnation} when the log is off. */
    public Map<String, Object> status() {
        Map<String, Object> status = new LinkedHashMap<>();
        status.put("enabled", log.enabled());
        status.put("incarnation", log.incarnation());
        if (log.enabled()) {
            status.put("log_depth", log.depth());
            status.put("log_capacity", log.capacity());
            status.put("next_seq", log.lastSeq() + 1);
            status.put("lost_markers", log.lostMarkers());
            status.put("unbound_stores", recorder.unboundStores());
            status.put("subscribers", streams.subscribers());
            status.put("batches_sent", streams.batches());
            status.put("batches_dropped", streams.batchesDropped());
            status.put("records_encoded", streams.encodings()); // each record once, however many batches carry it
        }
        return status;
    }

    // --- liveness -----------------------------------------------------------------------------------

    @Override
    public String livenessName() {
        return "kv_events";
    }

    @Override
    public void touchInstance(long instanceId, PeerId peer) {
        streams.touch(instanceId);
    }

    /** Ends silent subscriptions; returns no instance, since closing a subscription never reaps the worker's registration. */
    @Override
    public List<Reaped> reapStaleInstances(long timeoutNs, long graceNs) {
        streams.endSilent(timeoutNs);
        return List.of();
    }

    @Override
    public void dropInstanceState(long instanceId) {
        streams.instanceReaped(instanceId);
    }
}
