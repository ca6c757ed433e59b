package io.lmcache.server.metrics;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.LongAdder;

/**
 * CPU time of a STORE's or RETRIEVE's phases, summed per op, for /status: a request in flight alone waits for all of
 * it before its first copy, so the one-in-flight benchmark (testclient/gpu/inflight_bench.py) reads these to see which
 * phase to make faster. The request path uses it outside the handler ({@code request_path_cpu}), the transfer handler
 * inside ({@code transfer_handler_cpu}).
 */
public final class PhaseTimes<P extends Enum<P>> {
    private final P[] phases;
    private final LongAdder[][] nanos;
    private final LongAdder[] requests = {new LongAdder(), new LongAdder()};
    /**
     * The last {@link #RECENT} requests' whole times per op (receive to reply queued), oldest first in /status: the
     * one-in-flight benchmark reads a fresh server's first STOREs' handler p50 from it once, after them, instead of
     * reading totals between requests (which idled the transfer threads into parking and slowed what it measured).
     */
    public static final int RECENT = 128;
    private final AtomicLongArray[] recentNanos = {new AtomicLongArray(RECENT), new AtomicLongArray(RECENT)};
    private final AtomicLong[] recentCount = {new AtomicLong(), new AtomicLong()};
    /**
     * The last {@link #RECENT} requests' timelines per op: when the socket thread received each, when its reply was queued
     * and when the socket thread handed it to JeroMQ, in {@link System#nanoTime} (CLOCK_MONOTONIC on Linux, the clock of a
     * Python worker's {@code time.monotonic_ns()} on the same host). The benchmark lines them up with its own send and receive
     * times to split a request's wall time into the way in, the handler, the reply's wait and the way out (it found a fresh
     * server's one-chunk gap in the handler, not the socket thread: bench/journal/2026-12-07-request-timelines.md). One
     * writer, the socket thread.
     */
    private final AtomicLongArray[] timelines = {new AtomicLongArray(3 * RECENT), new AtomicLongArray(3 * RECENT)};
    private final AtomicLong[] timelineCount = {new AtomicLong(), new AtomicLong()};

    public PhaseTimes(Class<P> phaseType) {
        phases = phaseType.getEnumConstants();
        nanos = new LongAdder[2][phases.length];
        for (LongAdder[] op : nanos) {
            for (int p = 0; p < op.length; p++) {
                op[p] = new LongAdder();
            }
        }
    }

    /** Adds {@code nowNs - sinceNs} to the phase and returns {@code nowNs}, the next phase's start. */
    public long lap(boolean store, P phase, long sinceNs) {
        long nowNs = System.nanoTime();
        nanos[store ? 0 : 1][phase.ordinal()].add(nowNs - sinceNs);
        return nowNs;
    }

    /** One more request of the op is timed (counted before its reply goes out, so a client that has it finds it counted). */
    public void done(boolean store) {
        requests[store ? 0 : 1].increment();
    }

    /** One request of the op took {@code nanos} in all (kept among the last {@link #RECENT}). */
    public void recent(boolean store, long nanos) {
        int op = store ? 0 : 1;
        recentNanos[op].set((int) (recentCount[op].getAndIncrement() % RECENT), nanos);
    }

    /** The socket thread handed a request's reply to JeroMQ at {@code sentNs} (kept among the last {@link #RECENT}). */
    public void sent(boolean store, long receivedNs, long queuedNs, long sentNs) {
        int op = store ? 0 : 1;
        long count = timelineCount[op].get();
        int slot = 3 * (int) (count % RECENT);
        timelines[op].set(slot, receivedNs);
        timelines[op].set(slot + 1, queuedNs);
        timelines[op].set(slot + 2, sentNs);
        timelineCount[op].set(count + 1);
    }

    /**
     * The last timelines, oldest first, each {@code [received, queued, sent]} in ns; without the slots the writer may have
     * been overwriting meanwhile (those of requests {@link #RECENT} before the count read after the copy).
     */
    private long[][] recentTimelines(int op) {
        long count = timelineCount[op].get();
        long first = Math.max(0, count - RECENT);
        long[][] copy = new long[(int) (count - first)][];
        for (long i = first; i < count; i++) {
            int slot = 3 * (int) (i % RECENT);
            copy[(int) (i - first)] = new long[] {timelines[op].get(slot), timelines[op].get(slot + 1), timelines[op].get(slot + 2)};
        }
        long valid = Math.max(first, timelineCount[op].get() - RECENT + 1);
        return Arrays.copyOfRange(copy, (int) (Math.min(valid, count) - first), copy.length);
    }

    /** The last requests' times in µs, oldest first (fewer than {@link #RECENT} until that many ran). */
    private long[] recentMicros(int op) {
        long count = recentCount[op].get();
        int n = (int) Math.min(count, RECENT);
        long[] out = new long[n];
        for (int i = 0; i < n; i++) {
            out[i] = recentNanos[op].get((int) ((count - n + i) % RECENT)) / 1000;
        }
        return out;
    }

    public Map<String, Object> status() {
        Map<String, Object> out = new LinkedHashMap<>();
        for (int op = 0; op < 2; op++) {
            Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("requests", requests[op].sum());
            for (P phase : phases) {
                entry.put(phase.name().toLowerCase() + "_seconds", nanos[op][phase.ordinal()].sum() / 1e9);
            }
            if (recentCount[op].get() > 0) {
                entry.put("recent_us", recentMicros(op));
            }
            if (timelineCount[op].get() > 0) {
                entry.put("recent_timeline_ns", recentTimelines(op));
            }
            out.put(op == 0 ? "store" : "retrieve", entry);
        }
        return out;
    }
}
