package io.lmcache.server.transfer;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;

/**
 * Where a STORE or RETRIEVE handler spends its time before the reply, summed per op: planning (the
 * instance's lease, the key's chunks and hashes, the block checks), reserving or pinning the chunks'
 * objects in L1, and the copy path's call (building the pieces and, on the GPU, submitting them). A
 * request in flight alone waits for all of it, so the one-in-flight benchmark reads it from /status
 * (next to the GPU submit's own phases) to see which part to make faster.
 */
public final class HandlerTimes {
    public enum Phase { PLAN, OBJECTS, COPY }

    private final LongAdder[][] nanos = new LongAdder[2][Phase.values().length];
    private final LongAdder[] requests = {new LongAdder(), new LongAdder()};

    public HandlerTimes() {
        for (LongAdder[] op : nanos) {
            for (int p = 0; p < op.length; p++) {
                op[p] = new LongAdder();
            }
        }
    }

    /** Adds {@code nowNs - sinceNs} to the phase and returns {@code nowNs}, the next phase's start. */
    public long lap(boolean store, Phase phase, long sinceNs) {
        long nowNs = System.nanoTime();
        nanos[store ? 0 : 1][phase.ordinal()].add(nowNs - sinceNs);
        return nowNs;
    }

    public void done(boolean store) {
        requests[store ? 0 : 1].increment();
    }

    public Map<String, Object> status() {
        Map<String, Object> out = new LinkedHashMap<>();
        for (int op = 0; op < 2; op++) {
            Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("requests", requests[op].sum());
            for (Phase phase : Phase.values()) {
                entry.put(phase.name().toLowerCase() + "_seconds", nanos[op][phase.ordinal()].sum() / 1e9);
            }
            out.put(op == 0 ? "store" : "retrieve", entry);
        }
        return out;
    }
}
