package io.lmcache.server.metrics;

import java.util.LinkedHashMap;
import java.util.Map;
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

    public Map<String, Object> status() {
        Map<String, Object> out = new LinkedHashMap<>();
        for (int op = 0; op < 2; op++) {
            Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("requests", requests[op].sum());
            for (P phase : phases) {
                entry.put(phase.name().toLowerCase() + "_seconds", nanos[op][phase.ordinal()].sum() / 1e9);
            }
            out.put(op == 0 ? "store" : "retrieve", entry);
        }
        return out;
    }
}
