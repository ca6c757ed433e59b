package io.lmcache.server.loop;

import io.lmcache.server.agent.NamedThreads;
import io.lmcache.server.agent.SpinningTaskQueue;
import io.lmcache.server.logging.LogText;
import io.lmcache.server.logging.RateLimitedLog;
import io.lmcache.server.logging.RateLimitedLogs;
import io.lmcache.server.metrics.LivenessCatalogue;
import io.lmcache.server.metrics.PhaseTimes;
import io.lmcache.server.metrics.RequestCatalogue;
import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.peer.PeerId;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.ProtocolException;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.ReplyEncoder;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestDecoder;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs each request where its op's {@link OpTable} entry puts it ({@link HandlerKind}), decodes its
 * payload there, calls the handler and queues exactly one outcome: the reply, the entry's failure
 * value when anything goes wrong, or (only for unsupported ops) nothing.
 */
public final class Dispatcher implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(Dispatcher.class);
    private static final ThreadLocal<Codec> CODEC = ThreadLocal.withInitial(Codec::new);
    /**
     * The largest payload a QUICK request may have to run on the socket thread: a LOOKUP key of about
     * 3 000 token ids, decoded and hashed in ~10 µs. Longer prompts go to the CPU pool, so one long
     * lookup never holds up every other client's requests.
     */
    static final int QUICK_INLINE_MAX_PAYLOAD_BYTES = 16 * 1024;
    /**
     * Transfer threads left in stalled registrations at most (each replaced by a fresh one): past that a stalled registration
     * is still answered, but its lane waits for it (a driver that strands this many calls strands the next ones too).
     */
    static final int MAX_ABANDONED_THREADS = 4;

    private final OpTable table;
    private final ReplyQueue replies;
    private final RequestMeters requests;
    private final ExecutorService normalPool;
    private final ThreadPoolExecutor transferPool;
    private final ExecutorService backgroundPool;
    private final SpinningTaskQueue transferQueue;
    private final KeyedSerialExecutor<PeerId> transferLanes;
    private final AtomicInteger inflight = new AtomicInteger();
    /** The payload bytes of the requests in {@link #inflight}: the request loop stops reading above a bound. */
    private final AtomicLong inflightBytes = new AtomicLong();
    private final LongAdder overBudgetRequests;
    private final LongAdder deadlineAnswers;
    private final LongAdder abandonCapHits;
    /** Requests handed to the CPU pool and not finished: a QUICK request runs inline only when there are none. */
    private final AtomicInteger normalPending = new AtomicInteger();
    private final PhaseTimes<RequestPhase> times = new PhaseTimes<>(RequestPhase.class);
    private static final Runnable NOOP = () -> { };
    // a peer can cause each of these once per message: rate-limited, one budget per kind (bad requests: per reason)
    private static final RateLimitedLogs BAD_REQUEST_LINES = new RateLimitedLogs(LOG, "bad requests", 10);
    private static final RateLimitedLog UNKNOWN_OP_LINES = new RateLimitedLog(LOG, "requests with an unknown op", 10);
    private static final RateLimitedLog SHORT_MESSAGE_LINES = new RateLimitedLog(LOG, "messages with fewer than 3 frames", 10);
    private static final RateLimitedLog OVERSIZED_ENVELOPE_LINES = new RateLimitedLog(LOG, "messages with oversized uid or op frames", 10);
    private static final RateLimitedLog HANDLER_FAILURE_LINES = new RateLimitedLog(LOG, "decoder and handler failures", 10);
    private static final RateLimitedLog SHUTDOWN_REJECT_LINES = new RateLimitedLog(LOG, "requests rejected during shutdown", 10);
    private final Set<Op> warnedUnsupported = EnumSet.noneOf(Op.class);

    /**
     * {@code transferSpinNs}: how long an idle transfer thread busy-waits for the next STORE or RETRIEVE before it parks:
     * waking a parked thread sits in series with a lone request's first copy ({@code config.Tuning.transferSpinNs}).
     */
    public Dispatcher(OpTable table, ReplyQueue replies, ServerMetrics metrics, int cpuWorkers, int transferWorkers, long transferSpinNs) {
        this.table = table;
        this.replies = replies;
        this.requests = new RequestMeters(metrics);
        overBudgetRequests = metrics.declare(RequestCatalogue.REQUESTS_OVER_FRAME_BUDGET);
        deadlineAnswers = metrics.declare(LivenessCatalogue.TRANSFER_LANE_DEADLINE_ANSWERS);
        abandonCapHits = metrics.declare(LivenessCatalogue.TRANSFER_LANE_ABANDON_CAP_HITS);
        for (Op op : Op.values()) {
            if (table.entry(op) instanceof OpEntry.Handled<?> h && h.kind() == HandlerKind.QUICK) {
                requests.countInline(op);
            }
        }
        this.normalPool = NamedThreads.fixedPool("lmcache-normal", cpuWorkers);
        this.transferQueue = new SpinningTaskQueue(transferSpinNs);
        this.transferPool = NamedThreads.spinningPool("lmcache-transfer", transferWorkers, transferQueue);
        this.transferLanes = new KeyedSerialExecutor<>(transferPool, this::spareTransferThreads);
        metrics.gauge(LivenessCatalogue.TRANSFER_THREADS_ABANDONED, transferLanes::abandonedRunning);
        this.backgroundPool = NamedThreads.fixedPool("lmcache-background", 1);
    }

    /** The request path's meters (the activity log reads the request counts). */
    public RequestMeters meters() {
        return requests;
    }

    /** Requests accepted and not yet answered. */
    public int inflight() {
        return inflight.get();
    }

    public long inflightBytes() {
        return inflightBytes.get();
    }

    /**
     * Socket thread: a request one of whose frames did not fit the ZeroMQ frame budget (its bytes are not
     * the peer's, see {@code FrameBudget}). Answered at once with the op's failure value: the client waits.
     */
    public void overBudget(Inbound in) {
        requests.request(in.op());
        overBudgetRequests.increment();
        if (table.entry(in.op()) instanceof OpEntry.Handled<?> entry) {
            inflight.incrementAndGet();
            inflightBytes.addAndGet(in.payloadBytes());
            reply(in, entry);
        } else if (table.entry(in.op()) instanceof OpEntry.Streamed<?>) {
            replies.offer(new Outbound(in.identity(), in.uid(), in.opFrame(), null)); // the final reply: the stream ends at once
        }
    }

    /** Called on the socket thread for every request with a known op. */
    public void dispatch(Inbound in) {
        requests.request(in.op());
        if (in.op() == Op.LOOKUP && transferQueue.claimPrime()) {
            // a hit's RETRIEVE follows within milliseconds and waits for its copy: wake a transfer thread now, to spin for it
            try {
                transferPool.execute(NOOP);
            } catch (RejectedExecutionException e) {
                // shutting down: nothing to prime
            }
        }
        switch (table.entry(in.op())) {
            case OpEntry.Handled<?> entry -> schedule(in, entry);
            case OpEntry.Unsupported entry -> unsupported(entry);
            case OpEntry.Streamed<?> entry -> stream(in, entry);
        }
    }

    /** Socket thread: decodes a streaming request and hands it to its handler; one that cannot be decoded gets the final reply. */
    private <R extends Request> void stream(Inbound in, OpEntry.Streamed<R> entry) {
        StreamTarget target = new StreamTarget(in.identity(), in.uid(), in.opFrame());
        int payloads = Math.min(in.payloadCount(), entry.maxPayloads());
        try {
            R request = entry.decoder().decode(CODEC.get().decoder, in.frames(), Inbound.FIRST_PAYLOAD, Inbound.FIRST_PAYLOAD + payloads);
            entry.handler().open(request, target);
        } catch (ProtocolException e) {
            requests.badRequest(in.op(), e);
            BAD_REQUEST_LINES.of(e.reason().label()).warn("bad {} request from peer {} ({}): {}; ending its stream at once",
                    in.op().wireName(), LogText.clip(in.peer()), e.reason().label(), LogText.message(e.getMessage()));
            replies.offer(target.reply(null));
        } catch (RuntimeException e) {
            requests.handlerError(in.op());
            HANDLER_FAILURE_LINES.error("{} handler failed for peer {}; ending its stream", in.op().wireName(), LogText.clip(in.peer()), e);
            replies.offer(target.reply(null));
        }
    }

    private <R extends Request> void schedule(Inbound in, OpEntry.Handled<R> entry) {
        inflight.incrementAndGet();
        inflightBytes.addAndGet(in.payloadBytes());
        try {
            switch (entry.kind()) {
                case SYNC -> run(in, entry);
                case QUICK -> {
                    if (normalPending.get() == 0 && in.payloadBytes() <= QUICK_INLINE_MAX_PAYLOAD_BYTES) {
                        requests.inlineRequest(in.op());
                        run(in, entry);
                    } else {
                        runNormal(in, entry);
                    }
                }
                case NORMAL -> runNormal(in, entry);
                // runs on: lmcache-transfer-* (the peer's lane)
                case AFFINITY -> transferLanes.execute(in.peer(), new LaneRequest<>(in, entry));
                // runs on: lmcache-background-*
                case BACKGROUND -> backgroundPool.execute(() -> run(in, entry));
            }
        } catch (RejectedExecutionException e) {
            // only during shutdown: still answer, the client is waiting
            SHUTDOWN_REJECT_LINES.warn("{} rejected during shutdown; answering with its failure value", in.op().wireName());
            reply(in, entry);
        }
    }

    private <R extends Request> void runNormal(Inbound in, OpEntry.Handled<R> entry) {
        normalPending.incrementAndGet();
        try {
            // runs on: lmcache-normal-*
            normalPool.execute(() -> {
                try {
                    run(in, entry);
                } finally {
                    normalPending.decrementAndGet();
                }
            });
        } catch (RejectedExecutionException e) {
            normalPending.decrementAndGet();
            throw e;
        }
    }

    /** Socket thread: a message whose op frame names no operation we know. No reply: there is nothing valid to send. */
    public void unknownOp(byte[] opFrame, String detail) {
        requests.unknownOp();
        UNKNOWN_OP_LINES.warn("request with unknown op {} ({}): no handler, no reply", LogText.hex(opFrame), LogText.message(detail));
    }

    /** Socket thread: a message that cannot even be correlated (fewer than identity, uid and op). */
    public void shortMessage(int frames) {
        requests.shortMessage();
        SHORT_MESSAGE_LINES.warn("message with {} frame(s) dropped: a request needs identity, uid and op", frames);
    }

    /** Socket thread: a uid or op frame too long to be any client's; not answered (the reply would echo it). */
    public void oversizedEnvelope(int uidBytes, int opBytes) {
        requests.oversizedEnvelope();
        OVERSIZED_ENVELOPE_LINES.warn("message with a {}-byte uid and a {}-byte op frame dropped unanswered: a client's uid is at most"
                + " {} bytes and its op frame at most {}", uidBytes, opBytes, RequestLoop.MAX_UID_BYTES, RequestLoop.MAX_OP_BYTES);
    }

    private <R extends Request> void run(Inbound in, OpEntry.Handled<R> entry) {
        run(in, entry, null);
    }

    /** {@code answered}: null, or claimed by whichever answers first, this run or the lane deadline ({@link #answerStalled}). */
    private <R extends Request> void run(Inbound in, OpEntry.Handled<R> entry, AtomicBoolean answered) {
        Op op = in.op();
        long lapNs = lap(op, RequestPhase.QUEUE, in.receivedNs());
        if (timed(op)) {
            times.done(op == Op.STORE); // counted before its reply goes out: a client that has the reply finds it counted
        }
        Codec codec = CODEC.get();
        int payloads = in.payloadCount();
        int max = entry.maxPayloads();
        if (payloads > max) {
            requests.ignoredFrames(payloads - max);
            payloads = max;
        }
        R request;
        try {
            request = entry.decoder().decode(codec.decoder, in.frames(), Inbound.FIRST_PAYLOAD, Inbound.FIRST_PAYLOAD + payloads);
        } catch (ProtocolException e) {
            requests.badRequest(op, e);
            BAD_REQUEST_LINES.of(e.reason().label()).warn("bad {} request from peer {} ({}): {}; answering with its failure value",
                    op.wireName(), LogText.clip(in.peer()), e.reason().label(), LogText.message(e.getMessage()));
            reply(in, entry.failure().get(), entry, answered);
            return;
        } catch (RuntimeException e) {
            requests.handlerError(op);
            HANDLER_FAILURE_LINES.error("decoder failed on a {} request from peer {}; answering with its failure value", op.wireName(),
                    LogText.clip(in.peer()), e);
            reply(in, entry.failure().get(), entry, answered);
            return;
        }
        lapNs = lap(op, RequestPhase.DECODE, lapNs);
        Reply result;
        try {
            result = entry.handler().handle(request, in.peer(), partials(in));
            if (result == null) {
                throw new IllegalStateException("handler returned null");
            }
        } catch (Throwable t) {
            requests.handlerError(op);
            HANDLER_FAILURE_LINES.error("{} handler failed for peer {}; answering with its failure value", op.wireName(),
                    LogText.clip(in.peer()), t);
            result = entry.failure().get();
        }
        lapNs = lap(op, RequestPhase.HANDLE, lapNs);
        reply(in, result, entry, answered);
        lap(op, RequestPhase.REPLY, lapNs);
    }

    /** A request on a peer's transfer lane, answered once: by its run, or by the lane deadline if it is a registration. */
    private final class LaneRequest<R extends Request> implements Runnable {
        private final Inbound in;
        private final OpEntry.Handled<R> entry;
        private final AtomicBoolean answered = new AtomicBoolean();

        LaneRequest(Inbound in, OpEntry.Handled<R> entry) {
            this.in = in;
            this.entry = entry;
        }

        @Override
        public void run() {
            Dispatcher.this.run(in, entry, answered);
        }
    }

    /**
     * Runs on: lmcache-housekeeping ({@link LaneStallWatch}, once per stalled request). A registration still running is
     * answered now with its failure value and its lane goes on without it on a fresh thread; what it does if it ever returns
     * stands (a REGISTER then takes effect: the client, answered, goes on as if it had), but it is not answered again. True
     * when it was answered here; false for a STORE or RETRIEVE, whose copy must end before its reply.
     */
    public boolean answerStalled(KeyedSerialExecutor.Running<PeerId> running) {
        if (!(running.task() instanceof LaneRequest<?> request) || !request.entry.answeredAtDeadline()
                || !request.answered.compareAndSet(false, true)) {
            return false;
        }
        deadlineAnswers.increment();
        reply(request.in, request.entry.failure().get(), request.entry);
        if (transferLanes.abandonedRunning() < MAX_ABANDONED_THREADS) {
            transferLanes.abandon(running);
        } else {
            abandonCapHits.increment();
            LOG.error("{} transfer threads are stuck in registrations already: the lane of peer {} waits for its stalled {}",
                    MAX_ABANDONED_THREADS, LogText.clip(running.key()), request.in.op().wireName());
        }
        return true;
    }

    /** +1: a lane's thread was abandoned, the pool grows by one to keep its size; -1: it came back. */
    private void spareTransferThreads(int delta) {
        synchronized (transferPool) {
            int threads = transferPool.getMaximumPoolSize() + delta;
            if (delta > 0) {
                transferPool.setMaximumPoolSize(threads);
                transferPool.setCorePoolSize(threads);
            } else {
                transferPool.setCorePoolSize(threads);
                transferPool.setMaximumPoolSize(threads);
            }
        }
    }

    /**
     * The request's intermediate frames (RETRIEVE_LAYERWISE's layer batches): encoded on the handler's thread and queued under
     * its uid and op, before its last reply, which {@link #reply} queues once the handler returns.
     */
    private ReplyChannel partials(Inbound in) {
        return partial -> {
            byte[] payload = CODEC.get().encoder.encode(partial);
            return replies.offer(new Outbound(in.identity(), in.uid(), in.opFrame(), payload));
        };
    }

    /** STORE and RETRIEVE: the ops whose request path is timed (a lone request waits on its copy). */
    private static boolean timed(Op op) {
        return op == Op.STORE || op == Op.RETRIEVE;
    }

    /** Times a STORE's or RETRIEVE's phase; other ops pass {@code sinceNs} through. */
    private long lap(Op op, RequestPhase phase, long sinceNs) {
        return timed(op) ? times.lap(op == Op.STORE, phase, sinceNs) : sinceNs;
    }

    /** The request path's time outside the handlers, for /status. */
    public PhaseTimes<RequestPhase> times() {
        return times;
    }

    /** Answers with the entry's failure value (STORE/RETRIEVE: on a CUDA host, an event the worker can open). */
    private void reply(Inbound in, OpEntry.Handled<?> entry) {
        reply(in, entry.failure().get(), entry);
    }

    private void reply(Inbound in, Reply reply, OpEntry.Handled<?> entry, AtomicBoolean answered) {
        if (answered == null || answered.compareAndSet(false, true)) {
            reply(in, reply, entry);
        }
    }

    private void reply(Inbound in, Reply reply, OpEntry.Handled<?> entry) {
        byte[] payload;
        try {
            payload = CODEC.get().encoder.encode(reply);
        } catch (RuntimeException e) {
            requests.handlerError(in.op());
            HANDLER_FAILURE_LINES.error("cannot encode the {} reply; sending the failure value", in.op().wireName(), e);
            payload = CODEC.get().encoder.encode(entry.failure().get());
        }
        long queuedNs = System.nanoTime();
        replies.offer(new Outbound(in.identity(), in.uid(), in.opFrame(), payload, timed(in.op()) ? in.op() : null, in.receivedNs(),
                queuedNs));
        long nanos = queuedNs - in.receivedNs();
        requests.latency(in.op(), nanos);
        if (timed(in.op())) {
            times.recent(in.op() == Op.STORE, nanos);
        }
        inflightBytes.addAndGet(-in.payloadBytes());
        inflight.decrementAndGet();
    }

    /** No reply: the client treats the feature as unavailable. Counted and warned about here, on the socket thread. */
    private void unsupported(OpEntry.Unsupported entry) {
        Op op = entry.op();
        requests.unsupportedOp(op);
        boolean first;
        synchronized (warnedUnsupported) {
            first = warnedUnsupported.add(op);
        }
        if (first) {
            LOG.warn("{} (op {}) is not supported by this server ({}: no reply; the client treats the feature as unavailable); "
                    + "further requests are only counted", op.wireName(), op.id(), entry.feature());
        }
    }

    /** The transfer lanes' requests that started at or before {@code startedBeforeNs} and still run ({@link LaneStallWatch}). */
    public List<KeyedSerialExecutor.Running<PeerId>> transfersRunningSince(long startedBeforeNs) {
        return transferLanes.runningSince(startedBeforeNs);
    }

    @Override
    public void close() throws InterruptedException {
        for (ExecutorService pool : new ExecutorService[] {normalPool, transferPool, backgroundPool}) {
            pool.shutdown();
        }
        for (ExecutorService pool : new ExecutorService[] {normalPool, transferPool, backgroundPool}) {
            if (!pool.awaitTermination(5, TimeUnit.SECONDS)) {
                LOG.warn("handler pool did not finish within 5 s; abandoning its tasks");
                if (pool == transferPool) {
                    // where the transfer lanes' requests wait: the one record a hang leaves when it ends with the server
                    for (KeyedSerialExecutor.Running<PeerId> running : transfersRunningSince(System.nanoTime())) {
                        LOG.warn("still running on {} for peer {}: {}", running.thread().getName(), LogText.clip(running.key()),
                                LaneStallWatch.stack(running.thread()));
                    }
                }
                pool.shutdownNow();
            }
        }
    }

    /** Per-thread, reused decoder and encoder. */
    private static final class Codec {
        final RequestDecoder decoder = new RequestDecoder();
        final ReplyEncoder encoder = new ReplyEncoder();
    }
}
