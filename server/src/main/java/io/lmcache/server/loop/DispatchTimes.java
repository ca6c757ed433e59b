package io.lmcache.server.loop;

import io.lmcache.server.protocol.Op;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;

/**
 * Where a STORE or RETRIEVE spends its time on the request path outside its handler, summed per op: waiting for its
 * transfer lane's thread (received on the socket thread until the lane runs it), decoding the payload, the handler, and
 * encoding and queueing the reply. A request in flight alone waits for all of it before its first copy (the handler's
 * own phases are in {@code transfer_handler_cpu}); the one-in-flight benchmark reads both from /status.
 */
public final class DispatchTimes {
    public enum Phase { QUEUE, DECODE, HANDLE, REPLY }

    private final Map<Op, LongAdder[]> nanos = new EnumMap<>(Op.class);
    private final Map<Op, LongAdder> requests = new EnumMap<>(Op.class);

    DispatchTimes() {
        for (Op op : new Op[] {Op.STORE, Op.RETRIEVE}) {
            LongAdder[] phases = new LongAdder[Phase.values().length];
            for (int p = 0; p < phases.length; p++) {
                phases[p] = new LongAdder();
            }
            nanos.put(op, phases);
            requests.put(op, new LongAdder());
        }
    }

    /** True for the ops whose times are kept. */
    boolean tracks(Op op) {
        return requests.containsKey(op);
    }

    /** Adds {@code nowNs - sinceNs} to the phase and returns {@code nowNs}, the next phase's start; a no-op for other ops. */
    long lap(Op op, Phase phase, long sinceNs) {
        LongAdder[] phases = nanos.get(op);
        if (phases == null) {
            return sinceNs;
        }
        long nowNs = System.nanoTime();
        phases[phase.ordinal()].add(nowNs - sinceNs);
        if (phase == Phase.REPLY) {
            requests.get(op).increment();
        }
        return nowNs;
    }

    public Map<String, Object> status() {
        Map<String, Object> out = new LinkedHashMap<>();
        for (Map.Entry<Op, LongAdder[]> entry : nanos.entrySet()) {
            Map<String, Object> op = new LinkedHashMap<>();
            op.put("requests", requests.get(entry.getKey()).sum());
            for (Phase phase : Phase.values()) {
                op.put(phase.name().toLowerCase() + "_seconds", entry.getValue()[phase.ordinal()].sum() / 1e9);
            }
            out.put(entry.getKey().wireName().toLowerCase(), op);
        }
        return out;
    }
}
