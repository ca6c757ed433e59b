package io.lmcache.server.events;

import io.lmcache.server.agent.Agent;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.loop.Outbound;
import io.lmcache.server.loop.ReplyQueue;
import io.lmcache.server.loop.StreamControl;
import io.lmcache.server.loop.StreamTarget;
import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.ReplyEncoder;
import io.lmcache.server.protocol.Request;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The {@code subscribe_kv_events} streams (kv-events.md §8), an agent on its own thread ({@code lmcache-kv-events}): each
 * subscription gets its first batch at once, then one batch per credit, and only when the log has matching records or a loss
 * to report (no keep-alives). A credit is LMCache's forwarder event: an {@code ack} control frame sets it, a batch clears it, so
 * a subscriber that does not read holds at most one batch on the reply queue. A slow subscriber only falls behind in the log's
 * ring (and is told {@code lost}); no writer ever waits for it.
 *
 * <p>One subscription per instance id: a new one from the same peer ends the old; another peer's is refused, so no peer
 * can end a stream it did not open by naming its instance (issue 45, N13). A peer holds at most {@link #MAX_PER_PEER}
 * streams, the server {@link #MAX_STREAMS}, and a stream keeps a model name of at most {@link #MAX_MODEL_CHARS}. A stream
 * ends, with the final reply {@code [uid, op]}, on {@code cancel}, when its peer's connection closes or a reply could not be
 * routed, when its instance is reaped or has been silent (no PING) for the reap timeout, when the channel is off (after the
 * first batch said so), and at shutdown. A batch that did not go out (the reply queue's byte budget, or the peer's share of
 * unread bytes) is not counted as sent: its stream gets its credit back and the same records go again after
 * {@link #RETRY_NS} (N9).
 */
public final class KvEventStreams implements Agent, StreamControl {
    private static final Logger LOG = LoggerFactory.getLogger(KvEventStreams.class);
    private static final RateLimitedLog REFUSED = new RateLimitedLog(LOG, "refused KV-event subscriptions", 10);
    static final int MAX_EVENTS = KvEventLog.MAX_EVENTS;
    /**
     * Streams one peer identity may hold: a worker subscribes once per instance (vLLM: one rank per server), so a few cover
     * every real client, and a peer cannot hold the agent's work and the subscription table with thousands.
     */
    static final int MAX_PER_PEER = 8;
    /** Streams in all: each holds a model name and its place in the log, and costs the agent a read per pass. */
    static final int MAX_STREAMS = 1024;
    /**
     * The longest model name a subscription keeps (it outlives the reply): far above any model name or path LMCache's workers
     * send; a longer one names no model this server stores, and is refused.
     */
    static final int MAX_MODEL_CHARS = 4096;
    /** After a batch was dropped on the way out, the stream waits this long before it tries again (no busy retry). */
    static final long RETRY_NS = TimeUnit.MILLISECONDS.toNanos(100);
    private static final byte[] ACK = "ack".getBytes(StandardCharsets.US_ASCII);
    /**
     * The least time between two batches to one stream while records keep coming (a full batch does not wait for it: it goes
     * at the agent's next pass, at most one linger later). Without it each STORE sent every acking subscriber a batch and took
     * its ack back through the socket thread: with 8 subscribers the STORE round trip's p99 was 2.5–5×
     * (bench/RESULTS.md#kv-event-subscribers), and at 1 ms a feed of 500 STOREs a second still went out one batch per STORE and subscriber
     * (PING at one client 1.46× the echo with 8 subscribers). 5 ms batches such a feed by two or three; a router still learns
     * of a chunk well within one engine step (vLLM takes a connector's events once per scheduler step), and a record after a
     * quiet spell goes at once.
     */
    static final long LINGER_NS = TimeUnit.MILLISECONDS.toNanos(5);
    private static final byte[] CANCEL = "cancel".getBytes(StandardCharsets.US_ASCII);

    /** Why a stream ended (the metric's label). */
    public enum Ended {
        CANCELLED("cancelled"), REPLACED("replaced"), PEER_GONE("peer_gone"), REAPED("reaped"), SILENT("silent"), DISABLED("disabled"),
        REFUSED("refused"), SHUTDOWN("shutdown"), CONNECTION_CLOSED("connection_closed");

        private final String label;

        Ended(String label) {
            this.label = label;
        }

        public String label() {
            return label;
        }
    }

    /** One stream; its cursor and first-batch flag are the agent thread's, the rest any thread's. */
    private static final class Subscription {
        final long instanceId;
        final String model;
        final int maxEvents;
        final StreamTarget target;
        final String streamKey;
        final AtomicBoolean credit = new AtomicBoolean(true);
        final AtomicBoolean ended = new AtomicBoolean();
        volatile long lastSeenNs;
        long cursor;
        boolean sentFirst;
        /** When the last batch went out (the streams' clock): batches to one stream are at least {@link #LINGER_NS} apart. */
        long lastSentNs;
        /** The agent thread's: where the batch last sent started, and whether it was the first (to send it again if dropped). */
        long batchFromCursor;
        boolean batchWasFirst;
        /** The agent thread's: no batch before this time (a dropped batch's retry). */
        long holdUntilNs;
        /** Set by the socket thread when the stream's last batch was dropped there: the agent sends it again. */
        volatile boolean resend;

        Subscription(Request.SubscribeKvEvents request, StreamTarget target, long nowNs) {
            this.instanceId = request.instanceId();
            this.model = request.modelName();
            this.maxEvents = (int) request.maxEvents();
            this.cursor = request.cursor();
            this.target = target;
            this.streamKey = key(target.peer(), target.uid());
            this.lastSeenNs = nowNs;
            this.holdUntilNs = nowNs;
        }
    }

    private final KvEventLog log;
    private final ReplyQueue replies;
    private final LongSupplier clockNs;
    private final ReplyEncoder encoder = new ReplyEncoder(); // the agent thread's
    /**
     * The agent thread's, for one pass: the batch read and encoded for a (cursor, model, max_events), so subscribers at the
     * same point of the log (the usual case: they all follow every STORE) share one read and one encoding instead of one
     * each (with 8 subscribers, encoding was ~70 % of this thread's CPU). A batch read earlier in the pass is still right
     * for a later subscriber: it ends at its next_cursor, and what was appended since goes next time.
     */
    private final Map<Position, Shared> pass = new HashMap<>();

    private record Position(long cursor, String model, int maxEvents) {}

    /**
     * The agent thread's: the batches of one pass, queued together at its end, so the socket thread is woken once a pass,
     * not once a subscriber (each wake is a signal and a poll return on that thread, beside the requests it serves).
     */
    private final List<Pending> outgoing = new ArrayList<>();

    private record Pending(Subscription to, Outbound batch) {}

    /**
     * The agent thread's: the encodings of the last {@link #RECORD_CACHE} records by sequence number, so each record is encoded
     * once however many subscribers' batches carry it (acks arrive at different times, so their batches start at different
     * points of the log and the pass's sharing above seldom meets). About 1.3 KiB a record of 256 tokens: ~1.3 MiB.
     */
    static final int RECORD_CACHE = 1024;
    private final long[] cachedSeq = new long[RECORD_CACHE];
    private final byte[][] cachedRecord = new byte[RECORD_CACHE][];

    /** A read batch and, once a subscriber needed it, its encoding. */
    private static final class Shared {
        final Reply.KvEvents batch;
        byte[] payload;

        Shared(Reply.KvEvents batch) {
            this.batch = batch;
        }
    }
    private final Map<Long, Subscription> byInstance = new ConcurrentHashMap<>();
    private final Map<String, Subscription> byStream = new ConcurrentHashMap<>();
    private final LongAdder opened = new LongAdder();
    private final LongAdder batches = new LongAdder();
    private final LongAdder batchesDropped = new LongAdder();
    /** Peers whose connection closed (the monitor's I/O thread): the agent ends their streams at its next pass. */
    private final ConcurrentLinkedQueue<PeerId> closedPeers = new ConcurrentLinkedQueue<>();
    private final LongAdder encodings = new LongAdder();
    private final Map<Ended, LongAdder> ended = new EnumMap<>(Ended.class);
    /** The agent thread's: see {@link #idleParkNs}. */
    private long parkNs = Long.MAX_VALUE;
    /** Set by the agent when a subscriber with credit waits for records: the next append wakes it. */
    private volatile boolean waiting;
    /** Unparks the agent's thread (its runner's {@link io.lmcache.server.agent.Wake}, given before the runner exists). */
    private final Runnable wake;

    public KvEventStreams(KvEventLog log, ReplyQueue replies, LongSupplier clockNs, Runnable wake) {
        this.log = log;
        this.wake = wake;
        this.replies = replies;
        this.clockNs = clockNs;
        for (Ended reason : Ended.values()) {
            ended.put(reason, new LongAdder());
        }
        // runs on: whichever thread appended (a commit, a removal under the store's lock, an L2 thread): a flag read, rarely an unpark
        log.onAppend(this::wakeIfWaiting);
    }

    @Override
    public String roleName() {
        return "kv-event-streams";
    }

    // --- the socket thread -------------------------------------------------------------------------

    /** {@code subscribe_kv_events}: validated (as LMCache's handler), registered, and woken for its first batch. */
    public void open(Request.SubscribeKvEvents request, StreamTarget target) {
        if (request.cursor() < 0 || request.maxEvents() < 1 || request.maxEvents() > MAX_EVENTS) {
            refuse(target, "cursor {} and max_events {} (must be >= 0 and in [1, {}])", request.cursor(), request.maxEvents(), MAX_EVENTS);
            return;
        }
        if (request.modelName().length() > MAX_MODEL_CHARS) {
            refuse(target, "a model name of {} characters (at most {})", request.modelName().length(), MAX_MODEL_CHARS);
            return;
        }
        Subscription previous = byInstance.get(request.instanceId());
        if (previous != null && closedPeers.contains(previous.target.peer())) {
            end(previous, Ended.CONNECTION_CLOSED); // its connection closed and the agent has not ended it yet: a reconnect
            previous = null;
        }
        if (previous != null && !Arrays.equals(previous.target.identity(), target.identity())) {
            // only the connection that opened a stream may replace it: another peer naming the instance cannot end it
            refuse(target, "instance {} is subscribed by another peer", request.instanceId());
            return;
        }
        if (previous == null && (byInstance.size() >= MAX_STREAMS || streamsOf(target.identity()) >= MAX_PER_PEER)) {
            refuse(target, "{} streams open, {} of them this peer's (at most {} in all, {} a peer)", byInstance.size(),
                    streamsOf(target.identity()), MAX_STREAMS, MAX_PER_PEER);
            return;
        }
        Subscription subscription = new Subscription(request, target, clockNs.getAsLong());
        opened.increment();
        previous = byInstance.put(subscription.instanceId, subscription);
        if (previous != null) {
            end(previous, Ended.REPLACED);
        }
        Subscription sameStream = byStream.put(subscription.streamKey, subscription);
        if (sameStream != null && sameStream != previous) {
            end(sameStream, Ended.REPLACED);
        }
        wake.run();
    }

    /** Socket thread: a subscription refused at once, its final reply queued (the stream ends before it began). */
    private void refuse(StreamTarget target, String why, Object... args) {
        Object[] all = new Object[args.length + 1];
        all[0] = LogText.clip(target.peer());
        System.arraycopy(args, 0, all, 1, args.length);
        REFUSED.warn("subscribe_kv_events from peer {} refused: " + why, all);
        ended.get(Ended.REFUSED).increment();
        replies.offer(target.reply(null));
    }

    private int streamsOf(byte[] identity) {
        int n = 0;
        for (Subscription subscription : byInstance.values()) {
            if (Arrays.equals(subscription.target.identity(), identity)) {
                n++;
            }
        }
        return n;
    }

    @Override
    public void control(PeerId peer, byte[] uid, byte[] command) {
        Subscription subscription = byStream.get(key(peer, uid));
        if (subscription == null) {
            return; // an ended or unknown stream: ignored (kv-events.md §2)
        }
        if (Arrays.equals(command, ACK)) {
            subscription.credit.set(true);
            wake.run();
        } else if (Arrays.equals(command, CANCEL)) {
            end(subscription, Ended.CANCELLED);
        }
    }

    /** Socket thread: the stream's batch could not be sent (its peer is not reading): the agent sends it again later. */
    @Override
    public void dropped(PeerId peer, byte[] uid) {
        Subscription subscription = byStream.get(key(peer, uid));
        if (subscription != null) {
            subscription.resend = true;
            wake.run();
        }
    }

    /** A JeroMQ I/O thread (the connection monitor): the peer's connection closed; its streams end at the agent's next pass. */
    @Override
    public void connectionClosed(PeerId peer) {
        if (byInstance.isEmpty()) {
            return; // no stream to end (most closes): nothing queued for the agent
        }
        closedPeers.offer(peer);
        wake.run();
    }

    @Override
    public void undeliverable(PeerId peer) {
        for (Subscription subscription : byInstance.values()) {
            if (Arrays.equals(subscription.target.identity(), peer.bytes())) {
                end(subscription, Ended.PEER_GONE);
            }
        }
    }

    // --- liveness (the reaper's thread and PING on the socket thread) --------------------------------

    /** A PING from the instance keeps its subscription alive. */
    public void touch(long instanceId) {
        Subscription subscription = byInstance.get(instanceId);
        if (subscription != null) {
            subscription.lastSeenNs = clockNs.getAsLong();
        }
    }

    /** Ends the subscriptions silent for {@code timeoutNs} (LMCache's own rule: the subscription's last PING, or its start). */
    public void endSilent(long timeoutNs) {
        long nowNs = clockNs.getAsLong();
        for (Subscription subscription : byInstance.values()) {
            if (nowNs - subscription.lastSeenNs - timeoutNs > 0) {
                end(subscription, Ended.SILENT);
            }
        }
    }

    /** The instance was reaped by a transfer module: its subscription ends too. */
    public void instanceReaped(long instanceId) {
        Subscription subscription = byInstance.get(instanceId);
        if (subscription != null) {
            end(subscription, Ended.REAPED);
        }
    }

    /** Any thread: once per stream, out of the maps, and its final reply queued (the last reply the stream gets). */
    private void end(Subscription subscription, Ended reason) {
        synchronized (subscription) { // with the agent's flush: no batch is queued after the final reply
            if (!subscription.ended.compareAndSet(false, true)) {
                return;
            }
            byInstance.remove(subscription.instanceId, subscription);
            byStream.remove(subscription.streamKey, subscription);
            ended.get(reason).increment();
            replies.offer(subscription.target.reply(null));
        }
    }

    // --- the agent ---------------------------------------------------------------------------------

    @Override
    public int doWork() {
        try {
            return endClosed() + servePass();
        } finally {
            flush();
        }
    }

    /** The streams of peers whose connection closed end (their final reply is then dropped as undeliverable, harmlessly). */
    private int endClosed() {
        int work = 0;
        for (PeerId peer; (peer = closedPeers.poll()) != null; work++) {
            for (Subscription subscription : byInstance.values()) {
                if (Arrays.equals(subscription.target.identity(), peer.bytes())) {
                    end(subscription, Ended.CONNECTION_CLOSED);
                }
            }
        }
        return work;
    }

    /**
     * Queues the pass's batches, then wakes the socket thread once; a stream ended meanwhile gets none after its final reply. A
     * batch the reply queue refuses (over its byte budget) is not sent: it is not counted, and its stream gets its credit back
     * and its cursor where the batch began, so the same records go again a little later.
     */
    private void flush() {
        if (outgoing.isEmpty()) {
            return;
        }
        for (Pending pending : outgoing) {
            synchronized (pending.to()) {
                if (!pending.to().ended.get()) {
                    if (replies.offerQuietly(pending.batch())) {
                        batches.increment();
                    } else {
                        rewind(pending.to());
                    }
                }
            }
        }
        outgoing.clear();
        replies.wakeConsumer();
    }

    /** The agent thread's: the stream's last batch never reached its peer; it goes again after {@link #RETRY_NS}. */
    private void rewind(Subscription subscription) {
        batchesDropped.increment();
        subscription.cursor = subscription.batchFromCursor;
        subscription.sentFirst = !subscription.batchWasFirst;
        subscription.holdUntilNs = clockNs.getAsLong() + RETRY_NS;
        subscription.credit.set(true);
    }

    private int servePass() {
        pass.clear();
        int work = 0;
        boolean idleWithCredit = false;
        long last = log.lastSeq();
        long nowNs = clockNs.getAsLong();
        long parkForNs = Long.MAX_VALUE; // how long until the earliest lingering stream is due
        for (Subscription subscription : byInstance.values()) {
            if (subscription.resend) {
                subscription.resend = false;
                rewind(subscription);
            }
            if (subscription.ended.get() || !subscription.credit.get()) {
                continue;
            }
            if (nowNs - subscription.holdUntilNs < 0) {
                parkForNs = Math.min(parkForNs, subscription.holdUntilNs - nowNs);
                continue;
            }
            if (subscription.sentFirst && log.enabled() && subscription.cursor == last) {
                idleWithCredit = true;
                continue;
            }
            if (lingers(subscription, last, nowNs)) {
                parkForNs = Math.min(parkForNs, subscription.lastSentNs + LINGER_NS - nowNs);
                continue;
            }
            work += serve(subscription);
        }
        parkNs = parkForNs;
        if (idleWithCredit) {
            waiting = true;
            if (log.lastSeq() != last) {
                waiting = false;
                return work + 1; // appended meanwhile: look again at once
            }
        }
        return work;
    }

    private boolean lingers(Subscription subscription, long lastSeq, long nowNs) {
        return subscription.sentFirst && lastSeq - subscription.cursor < subscription.maxEvents && nowNs - subscription.lastSentNs < LINGER_NS;
    }

    /**
     * The agent thread's: how long it may park after an idle pass, until the earliest lingering stream is due ({@code
     * Long.MAX_VALUE} when none lingers: appends, acks and new subscriptions wake it).
     */
    public long idleParkNs() {
        return parkNs;
    }

    /** One read for a subscription with credit; a batch goes out when it is the first or says something. */
    private int serve(Subscription subscription) {
        Shared shared = pass.computeIfAbsent(new Position(subscription.cursor, subscription.model, subscription.maxEvents),
                at -> new Shared(log.read(at.cursor(), at.model(), at.maxEvents())));
        Reply.KvEvents batch = shared.batch;
        if (!batch.enabled() && subscription.sentFirst) {
            end(subscription, Ended.DISABLED); // the first batch said so; the next read ends the stream
            return 1;
        }
        long fromCursor = subscription.cursor;
        subscription.cursor = batch.nextCursor();
        if (subscription.sentFirst && batch.events().isEmpty() && !batch.lost()) {
            return 1; // other models' records only: the cursor moves (the next pass may wait for appends), nothing is sent
        }
        subscription.batchFromCursor = fromCursor;
        subscription.batchWasFirst = !subscription.sentFirst;
        subscription.sentFirst = true;
        subscription.credit.set(false);
        if (shared.payload == null) {
            shared.payload = encode(batch);
        }
        outgoing.add(new Pending(subscription, subscription.target.reply(shared.payload)));
        subscription.lastSentNs = clockNs.getAsLong();
        return 1;
    }

    /** The batch from its records' cached encodings, each record encoded at most once while it stays in the cache. */
    private byte[] encode(Reply.KvEvents batch) {
        List<byte[]> records = new ArrayList<>(batch.events().size());
        for (Reply.KvEventRecord record : batch.events()) {
            int slot = (int) Long.remainderUnsigned(record.seq(), RECORD_CACHE);
            if (cachedSeq[slot] != record.seq() || cachedRecord[slot] == null) {
                cachedRecord[slot] = encoder.encodeKvEventRecord(record);
                cachedSeq[slot] = record.seq();
                encodings.increment();
            }
            records.add(cachedRecord[slot]);
        }
        return encoder.encodeKvEvents(batch.enabled(), batch.incarnation(), batch.nextCursor(), batch.lost(), records);
    }

    private void wakeIfWaiting() {
        if (waiting) {
            waiting = false;
            wake.run();
        }
    }

    /** Shutdown: every stream gets its final reply (the request loop drains after the agents close). */
    @Override
    public void onClose() {
        for (Subscription subscription : byInstance.values()) {
            end(subscription, Ended.SHUTDOWN);
        }
    }

    // --- counts ----------------------------------------------------------------------------------

    public int subscribers() {
        return byInstance.size();
    }

    public long opened() {
        return opened.sum();
    }

    public long batches() {
        return batches.sum();
    }

    /** Batches that did not reach their peer (the reply budget refused them, or the peer did not read): sent again later. */
    public long batchesDropped() {
        return batchesDropped.sum();
    }

    /** Records encoded: each once while it stays in the record cache, however many batches carry it. */
    public long encodings() {
        return encodings.sum();
    }

    public LongAdder endedCounter(Ended reason) {
        return ended.get(reason);
    }

    private static String key(PeerId peer, byte[] uid) {
        return peer + "/" + HexFormat.of().formatHex(uid);
    }
}
