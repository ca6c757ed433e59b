package io.lmcache.server.module;

import io.lmcache.server.liveness.InstanceLivenessTarget;
import io.lmcache.server.liveness.Reaper;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.loop.HandlerKind;
import io.lmcache.server.loop.OpTable;
import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestDecoder;
import io.lmcache.server.storage.ObjectStore;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Handshake, health and housekeeping: GET_CHUNK_SIZE, GET_EXPERIMENTAL, NOOP, PING, CLEAR,
 * REPORT_BLOCK_ALLOCATION, and the worker reaper over every liveness target. Built last and closed
 * first, so no reap runs against a half-closed module.
 */
public final class ManagementModule {
    private static final Logger LOG = LoggerFactory.getLogger(ManagementModule.class);
    // a peer can send a PING or a CLEAR per message
    private static final RateLimitedLog PING_FAILED = new RateLimitedLog(LOG, "liveness failures on PING", 10);
    private static final RateLimitedLog CLEARED = new RateLimitedLog(LOG, "CLEAR requests", 10);
    private static final Reply OK = new Reply.Str("OK");
    private static final Reply NO_EXPERIMENTS = new Reply.StrList(List.of());

    private final Reply chunkSize;
    private final ObjectStore store;
    private final List<InstanceLivenessTarget> targets;
    private final Reaper reaper;
    private final Map<String, Object> livenessSettings;
    private boolean reaperRunning;
    /** GET_EXPERIMENTAL's answer: the KV-event capabilities while the log is on (kv-events.md §4). */
    private final Reply experimental;
    /** The KV-event channel (null: none, the ops tests' servers). */
    private final KvEventModule kvEvents;

    public ManagementModule(int chunkSize, ObjectStore store, List<InstanceLivenessTarget> targets, Reaper reaper,
            Map<String, Object> livenessSettings) {
        this(chunkSize, store, targets, reaper, livenessSettings, null);
    }

    /** {@code kvEvents}: its ops are advertised (only while its log is on) and its state shown in /status. */
    public ManagementModule(int chunkSize, ObjectStore store, List<InstanceLivenessTarget> targets, Reaper reaper,
            Map<String, Object> livenessSettings, KvEventModule kvEvents) {
        this.chunkSize = new Reply.Int(chunkSize);
        this.store = store;
        this.targets = List.copyOf(targets);
        this.reaper = reaper;
        this.livenessSettings = livenessSettings;
        this.kvEvents = kvEvents;
        this.experimental = kvEvents == null ? NO_EXPERIMENTS : new Reply.StrList(kvEvents.capabilities());
    }

    /**
     * This module's ops. The handshake ops' failure value is their normal answer; PING runs inline, so it
     * never waits behind a pool's queue, and always answers true.
     */
    public void declareOps(OpTable.Builder ops) {
        // runs on: lmcache-request-loop (SYNC) or lmcache-normal-* (NORMAL: clear, block allocation report)
        ops.op(Op.GET_CHUNK_SIZE, HandlerKind.SYNC, RequestDecoder::getChunkSize, (r, peer) -> getChunkSize(), chunkSize);
        ops.op(Op.GET_EXPERIMENTAL, HandlerKind.SYNC, RequestDecoder::getExperimental, (r, peer) -> getExperimental(), NO_EXPERIMENTS);
        ops.op(Op.NOOP, HandlerKind.SYNC, RequestDecoder::noop, (r, peer) -> noop(), OK);
        ops.op(Op.PING, HandlerKind.SYNC, RequestDecoder::ping, this::ping, Reply.TRUE);
        ops.op(Op.CLEAR, HandlerKind.NORMAL, RequestDecoder::clear, (r, peer) -> clear(r), Reply.NONE);
        ops.op(Op.REPORT_BLOCK_ALLOCATION, HandlerKind.NORMAL, RequestDecoder::reportBlockAllocation,
                (r, peer) -> reportBlockAllocation(r), Reply.NONE);
    }

    /** {@code /status} {@code kv_events}, or null without the channel. */
    public Map<String, Object> kvEventsStatus() {
        return kvEvents == null ? null : kvEvents.status();
    }

    public void start() {
        reaperRunning = reaper.enabled();
    }

    public Reply getChunkSize() {
        return chunkSize;
    }

    public Reply getExperimental() {
        return experimental;
    }

    public Reply noop() {
        return OK;
    }

    /**
     * Touches every target for a worker's id (the scheduler's None is an untracked probe) and always
     * answers true: a false or late answer sends the client into degraded mode.
     */
    public Reply ping(Request.Ping ping, PeerId peer) {
        if (!ping.untracked()) {
            for (InstanceLivenessTarget target : targets) {
                try {
                    target.touchInstance(ping.instanceId(), peer);
                } catch (RuntimeException e) {
                    PING_FAILED.error("liveness target {} failed on PING of {}", target.livenessName(), ping.instanceId(), e);
                }
            }
        }
        return Reply.TRUE;
    }

    /** Empties L1; objects in use stay unless forced (then they go as soon as their copy ends). */
    public Reply clear(Request.Clear clear) {
        ObjectStore.ClearResult result = store.clear(clear.force());
        CLEARED.info("CLEAR (force={}): removed {} object(s), {} MiB{}", clear.force(), result.removed(), result.bytes() >> 20,
                result.deferred() > 0 ? ", " + result.deferred() + " in use go when released" : "");
        return Reply.NONE;
    }

    public Reply reportBlockAllocation(Request.ReportBlockAllocation report) {
        if (LOG.isDebugEnabled()) {
            LOG.debug("block allocation report from {} ({}): {} record(s)", report.instanceId(), LogText.clip(report.modelName()),
                    report.records().size());
        }
        return Reply.NONE;
    }

    /** LMCache's {@code worker_liveness} status block, plus what we count. */
    public Map<String, Object> livenessStatus() {
        Map<String, Object> status = new LinkedHashMap<>(livenessSettings);
        status.put("enabled", reaperRunning);
        status.put("tracked_instances", reaper.trackedInstances());
        Map<String, Object> reaped = new LinkedHashMap<>();
        for (InstanceLivenessTarget.Reason reason : InstanceLivenessTarget.Reason.values()) {
            reaped.put(reason.label(), reaper.reaped(reason));
        }
        status.put("reaped_workers", reaped);
        status.put("release_timeouts", reaper.releaseTimeouts());
        status.put("release_failures", reaper.releaseFailures());
        return status;
    }

    public Reaper reaper() {
        return reaper;
    }
}
