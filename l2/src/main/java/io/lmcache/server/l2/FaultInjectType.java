package io.lmcache.server.l2;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ThreadFactory;

/** The {@code fault_inject} decorator type (hybrid-and-l2.md §B.7): its JSON object wraps another adapter's; its I/O, {@link FaultInjectIo}. */
public final class FaultInjectType implements L2AdapterType {
    static final String NAME = "fault_inject";
    private static final Set<String> KEYS = Set.of("type", "inner", "rate", "seed", "gap_indices", "gap_tail_ratios");

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public FaultInjectSpec parse(JsonNode node, Map<String, String> env) throws L2SpecException {
        SpecFields.unknownKeys(node, "fault_inject", Set.of(), KEYS);
        JsonNode inner = node.get("inner");
        if (inner == null || !inner.isObject()) {
            throw new L2SpecException("fault_inject: 'inner' must be an adapter spec object with a 'type' field");
        }
        L2AdapterSpec innerSpec;
        try {
            innerSpec = L2AdapterSpecs.parse(inner, env);
        } catch (L2SpecException e) {
            throw new L2SpecException("fault_inject inner: " + e.getMessage());
        }
        JsonNode rate = node.get("rate");
        if (rate != null && (!rate.isNumber() || !(rate.asDouble() >= 0 && rate.asDouble() <= 1))) {
            throw new L2SpecException("fault_inject: rate must be a number in [0, 1], got " + L2SpecException.clip(rate));
        }
        JsonNode seed = node.get("seed");
        if (seed != null && (!seed.isIntegralNumber() || !seed.canConvertToLong())) {
            throw new L2SpecException("fault_inject: seed must be an integer, got " + L2SpecException.clip(seed));
        }
        List<Integer> gapIndices = new ArrayList<>();
        JsonNode gaps = node.get("gap_indices");
        if (gaps != null) {
            if (!gaps.isArray()) {
                throw new L2SpecException("fault_inject: gap_indices must be a list of non-negative integers, got " + L2SpecException.clip(gaps));
            }
            for (JsonNode gap : gaps) {
                if (!gap.isIntegralNumber() || !gap.canConvertToInt() || gap.asInt() < 0) {
                    throw new L2SpecException("fault_inject: gap_indices must be a list of non-negative integers, got " + L2SpecException.clip(gaps));
                }
                gapIndices.add(gap.asInt());
            }
        }
        List<Double> ratios = new ArrayList<>();
        JsonNode tail = node.get("gap_tail_ratios");
        if (tail != null) {
            if (!tail.isArray()) {
                throw new L2SpecException("fault_inject: gap_tail_ratios must be a list of floats in [0, 1], got " + L2SpecException.clip(tail));
            }
            for (JsonNode ratio : tail) {
                if (!ratio.isNumber() || !(ratio.asDouble() >= 0 && ratio.asDouble() <= 1)) {
                    throw new L2SpecException("fault_inject: gap_tail_ratios must be a list of floats in [0, 1], got " + L2SpecException.clip(tail));
                }
                ratios.add(ratio.asDouble());
            }
        }
        FaultRules rules = new FaultRules(rate == null ? 0.0 : rate.asDouble(), seed == null ? 0 : seed.asLong(), new TreeSet<>(gapIndices),
                ratios);
        return new FaultInjectSpec(innerSpec, rules);
    }

    /** The inner adapter's I/O with the load results filtered: one ledger, one skeleton for both. */
    @Override
    public AdapterIo open(L2AdapterSpec spec, ThreadFactory threads, AdapterLedger ledger) throws IOException {
        FaultInjectSpec fault = (FaultInjectSpec) spec;
        return new FaultInjectIo(L2AdapterTypes.open(fault.inner(), threads, ledger), fault.rules());
    }
}
