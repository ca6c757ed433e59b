package io.lmcache.server.cuda;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;

/**
 * Where a transfer's submit spends its CPU time, per direction: opening and waiting on the worker's
 * event, enqueueing the copies (descriptors, kernel launches, DMA calls), and making the reply's
 * interprocess event. A request in flight alone waits for all of it before its first byte moves, so
 * this is what the one-in-flight benchmark reads (from /status) to tell the phases apart.
 */
final class SubmitTimes {
    /**
     * OPEN, ENQUEUE and EXPORT add up to the submit; FIRST_COPY (from the submit's start until its first copy is
     * enqueued, so the GPU can start) overlaps OPEN and ENQUEUE: it is the submit's share of a lone request's latency,
     * the rest of the enqueueing running while the first batches copy.
     */
    enum Phase { OPEN, ENQUEUE, EXPORT, FIRST_COPY }

    private final LongAdder[][] nanos = new LongAdder[Direction.values().length][Phase.values().length];
    private final LongAdder[] submits = new LongAdder[Direction.values().length];
    /** Bytes moved by the batched-copy head (see {@code Tuning.dmaHeadBytes}), not through staging. */
    private final LongAdder[] headBytes = new LongAdder[Direction.values().length];
    /** Empty kernels launched ahead of a transfer on an idle lane (see {@code CopyEngine.warm}). */
    private final LongAdder[] warmLaunches = new LongAdder[Direction.values().length];
    /** Transfers whose worker event the poller had opened while the handler planned ({@link OpenedAhead}). */
    private final LongAdder[] openedAhead = new LongAdder[Direction.values().length];

    SubmitTimes() {
        for (int d = 0; d < submits.length; d++) {
            submits[d] = new LongAdder();
            headBytes[d] = new LongAdder();
            warmLaunches[d] = new LongAdder();
            openedAhead[d] = new LongAdder();
            for (int p = 0; p < Phase.values().length; p++) {
                nanos[d][p] = new LongAdder();
            }
        }
    }

    void add(Direction direction, Phase phase, long elapsedNs) {
        nanos[direction.ordinal()][phase.ordinal()].add(elapsedNs);
    }

    void submitted(Direction direction, long dmaHeadBytes, boolean eventOpenedAhead) {
        submits[direction.ordinal()].increment();
        headBytes[direction.ordinal()].add(dmaHeadBytes);
        if (eventOpenedAhead) {
            openedAhead[direction.ordinal()].increment();
        }
    }

    void warmed(Direction direction) {
        warmLaunches[direction.ordinal()].increment();
    }

    /**
     * Per direction: submits, the seconds of each phase, and the bytes the batched-copy head moved, the warm-up launches and
     * the worker events opened ahead, summed.
     */
    static Map<String, Object> status(Iterable<SubmitTimes> engines) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (Direction direction : Direction.values()) {
            long count = 0;
            long head = 0;
            long warms = 0;
            long ahead = 0;
            long[] phaseNanos = new long[Phase.values().length];
            for (SubmitTimes times : engines) {
                count += times.submits[direction.ordinal()].sum();
                head += times.headBytes[direction.ordinal()].sum();
                warms += times.warmLaunches[direction.ordinal()].sum();
                ahead += times.openedAhead[direction.ordinal()].sum();
                for (Phase phase : Phase.values()) {
                    phaseNanos[phase.ordinal()] += times.nanos[direction.ordinal()][phase.ordinal()].sum();
                }
            }
            Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("submits", count);
            for (Phase phase : Phase.values()) {
                entry.put(phase.name().toLowerCase() + "_seconds", phaseNanos[phase.ordinal()] / 1e9);
            }
            entry.put("dma_head_bytes", head);
            entry.put("warm_launches", warms);
            entry.put("events_opened_ahead", ahead);
            out.put(direction == Direction.TO_POOL ? "store" : "retrieve", entry);
        }
        return out;
    }
}
