package io.lmcache.server.loop;

import io.lmcache.server.metrics.ServerMetrics;
import io.lmcache.server.protocol.Op;
import io.lmcache.server.protocol.ProtocolException;
import io.lmcache.server.protocol.Reply;
import io.lmcache.server.protocol.ReplyEncoder;
import io.lmcache.server.protocol.Request;
import io.lmcache.server.protocol.RequestDecoder;
import java.util.EnumSet;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs each request where its operation belongs ({@link HandlerKind}), decodes its payload there,
 * calls the handler and queues exactly one outcome: the reply, the failure value when anything
 * goes wrong, or (only for operations that have no handler here) nothing.
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

    private final RequestHandler handler;
    private final ReplyQueue replies;
    private final ServerMetrics metrics;
    private final FailureReplies failures;
    private final ExecutorService normalPool;
    private final ExecutorService transferPool;
    private final KeyedSerialExecutor<PeerId> transferLanes;
    private final AtomicInteger inflight = new AtomicInteger();
    /** Requests handed to the CPU pool and not finished: a QUICK request runs inline only when there are none. */
    private final AtomicInteger normalPending = new AtomicInteger();
    private final RateLimitedLog badInputLog = new RateLimitedLog(LOG, 20);
    private final Set<Op> warnedUnsupported = EnumSet.noneOf(Op.class);

    public Dispatcher(RequestHandler handler, ReplyQueue replies, ServerMetrics metrics, FailureReplies failures,
            int cpuWorkers, int transferWorkers) {
        this.handler = handler;
        this.replies = replies;
        this.metrics = metrics;
        this.failures = failures;
        this.normalPool = NamedThreads.fixedPool("lmcache-normal", cpuWorkers);
        this.transferPool = NamedThreads.fixedPool("lmcache-transfer", transferWorkers);
        this.transferLanes = new KeyedSerialExecutor<>(transferPool);
    }

    /** Requests accepted and not yet answered. */
    public int inflight() {
        return inflight.get();
    }

    /** Called on the socket thread for every request with a known op. */
    public void dispatch(Inbound in) {
        metrics.request(in.op());
        inflight.incrementAndGet();
        HandlerKind kind = HandlerKind.of(in.op());
        try {
            switch (kind) {
                case SYNC -> run(in);
                case QUICK -> {
                    if (normalPending.get() == 0 && in.payloadBytes() <= QUICK_INLINE_MAX_PAYLOAD_BYTES) {
                        metrics.inlineRequest(in.op());
                        run(in);
                    } else {
                        runNormal(in);
                    }
                }
                case NORMAL -> runNormal(in);
                case AFFINITY -> transferLanes.execute(in.peer(), () -> run(in));
            }
        } catch (RejectedExecutionException e) {
            // only during shutdown: still answer, the client is waiting
            LOG.warn("{} rejected during shutdown; answering with its failure value", in.op().wireName());
            reply(in, failures.forOp(in.op()));
        }
    }

    private void runNormal(Inbound in) {
        normalPending.incrementAndGet();
        try {
            normalPool.execute(() -> {
                try {
                    run(in);
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
        metrics.unknownOp();
        badInputLog.warn("request with unknown op {} ({}): no handler, no reply", java.util.HexFormat.of().formatHex(opFrame), detail);
    }

    /** Socket thread: a message that cannot even be correlated (fewer than identity, uid and op). */
    public void shortMessage(int frames) {
        metrics.shortMessage();
        badInputLog.warn("message with {} frame(s) dropped: a request needs identity, uid and op", frames);
    }

    private void run(Inbound in) {
        Op op = in.op();
        Codec codec = CODEC.get();
        int payloads = in.payloadCount();
        int max = RequestDecoder.maxPayloads(op);
        if (payloads > max) {
            metrics.ignoredFrames(payloads - max);
            payloads = max;
        }
        Request request;
        try {
            request = codec.decoder.decode(op, in.frames(), Inbound.FIRST_PAYLOAD, Inbound.FIRST_PAYLOAD + payloads);
        } catch (ProtocolException e) {
            metrics.badRequest(e.reason());
            badInputLog.warn("bad {} request from peer {} ({}): {}; answering with its failure value", op.wireName(), in.peer(),
                    e.reason().label(), e.getMessage());
            reply(in, failures.forOp(op));
            return;
        } catch (RuntimeException e) {
            metrics.handlerError(op);
            LOG.error("decoder failed on a {} request from peer {}; answering with its failure value", op.wireName(), in.peer(), e);
            reply(in, failures.forOp(op));
            return;
        }
        if (request instanceof Request.Unsupported) {
            metrics.unsupportedOp(op);
            warnUnsupportedOnce(op);
            noReply();
            return;
        }
        Reply result;
        try {
            result = handler.handle(request, in.peer());
            if (result == null) {
                throw new IllegalStateException("handler returned null");
            }
        } catch (Throwable t) {
            metrics.handlerError(op);
            LOG.error("{} handler failed for peer {}; answering with its failure value", op.wireName(), in.peer(), t);
            result = failures.forOp(op);
        }
        reply(in, result);
    }

    private void reply(Inbound in, Reply reply) {
        byte[] payload;
        try {
            payload = CODEC.get().encoder.encode(reply);
        } catch (RuntimeException e) {
            metrics.handlerError(in.op());
            LOG.error("cannot encode the {} reply; sending the failure value", in.op().wireName(), e);
            payload = CODEC.get().encoder.encode(failures.forOp(in.op()));
        }
        replies.offer(new Outbound(in.identity(), in.uid(), in.opFrame(), payload));
        metrics.latency(in.op(), System.nanoTime() - in.receivedNs());
        inflight.decrementAndGet();
    }

    private void noReply() {
        inflight.decrementAndGet();
    }

    private void warnUnsupportedOnce(Op op) {
        boolean first;
        synchronized (warnedUnsupported) {
            first = warnedUnsupported.add(op);
        }
        if (first) {
            LOG.warn("{} (op {}) is not supported by this server (no reply; the client treats the feature as unavailable); "
                    + "further requests are only counted", op.wireName(), op.id());
        }
    }

    @Override
    public void close() throws InterruptedException {
        for (ExecutorService pool : new ExecutorService[] {normalPool, transferPool}) {
            pool.shutdown();
        }
        for (ExecutorService pool : new ExecutorService[] {normalPool, transferPool}) {
            if (!pool.awaitTermination(5, TimeUnit.SECONDS)) {
                LOG.warn("handler pool did not finish within 5 s; abandoning its tasks");
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
