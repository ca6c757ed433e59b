package io.lmcache.server.l2;

import java.lang.foreign.MemorySegment;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * fault_inject (hybrid-and-l2.md §B.7), for tests and diagnostics: a decorator of another adapter's I/O that reports keys present
 * at lookup and then fails their load, which is how a real L2 read error looks and what leaves a gapped found-set. Only load
 * answers are touched (a dropped position answers a miss, by its place in the task's key list; no unlock: the prefetch controller
 * releases every plan key itself); everything else goes to the inner I/O unchanged, under the one skeleton both share.
 */
public final class FaultInjectIo implements AdapterIo {
    private static final Logger LOG = LoggerFactory.getLogger(FaultInjectIo.class);
    /** Items of a rule list the banner and status show (a spec may name millions of gap indices): the count says the rest. */
    static final int SHOWN_ITEMS = 16;

    private final AdapterIo inner;
    private final FaultRules rules;

    public FaultInjectIo(AdapterIo inner, FaultRules rules) {
        this.inner = inner;
        this.rules = rules;
        LOG.warn(String.format(Locale.ROOT, "FaultInjectL2Adapter ACTIVE (rate=%.3f seed=%d gap_indices=%s gap_tail_ratios=%s) wrapping %s"
                + " -- test/diagnostic use only.", rules.rate(), rules.seed(), shown(rules.gapIndices()), shown(rules.gapTailRatios()),
                inner.typeName()));
    }

    @Override
    public String typeName() {
        return "FaultInjectL2Adapter";
    }

    @Override
    public boolean accepts(Op op, int keys) {
        return inner.accepts(op, keys);
    }

    @Override
    public void store(L2Key key, MemorySegment object, Consumer<Stored> done) {
        inner.store(key, object, done);
    }

    @Override
    public void lookup(List<L2Key> keys, Map<Integer, Long> objectBytesByGroup, KeyAnswers found) {
        inner.lookup(keys, objectBytesByGroup, found);
    }

    /** The inner load runs in full (the bytes land as a real partial read's would); the dropped positions answer a miss. */
    @Override
    public void load(List<L2Key> keys, List<MemorySegment> buffers, KeyAnswers loaded) {
        int[] dropped = rules.dropPositions(keys);
        boolean[] drop = new boolean[keys.size()];
        for (int position : dropped) {
            drop[position] = true;
        }
        if (dropped.length > 0) {
            LOG.debug("FaultInject: dropping {}/{} load keys", dropped.length, keys.size());
        }
        inner.load(keys, buffers, (index, hit) -> loaded.answer(index, hit && !drop[index]));
    }

    @Override
    public void delete(L2Key key, Consumer<Deleted> done) {
        inner.delete(key, done);
    }

    @Override
    public Map<String, Long> eventCounts() {
        return inner.eventCounts();
    }

    /** The inner adapter's status with the fault settings added. */
    @Override
    public Map<String, Object> status() {
        Map<String, Object> status = new LinkedHashMap<>(inner.status());
        Map<String, Object> settings = new LinkedHashMap<>();
        settings.put("rate", rules.rate());
        settings.put("seed", rules.seed());
        settings.put("gap_indices", first(rules.gapIndices()));
        settings.put("gap_indices_count", rules.gapIndices().size());
        settings.put("gap_tail_ratios", first(rules.gapTailRatios()));
        settings.put("gap_tail_ratios_count", rules.gapTailRatios().size());
        status.put("fault_inject", settings);
        return status;
    }

    /** The first {@link #SHOWN_ITEMS} items. */
    static List<Object> first(Collection<?> items) {
        return items.stream().limit(SHOWN_ITEMS).map(Object.class::cast).toList();
    }

    /** {@code items} as the banner prints them: {@code [a, b]}, or the first {@link #SHOWN_ITEMS} and how many there are. */
    static String shown(Collection<?> items) {
        String head = first(items).toString();
        return items.size() <= SHOWN_ITEMS ? head : head.substring(0, head.length() - 1) + ", ...(" + items.size() + " items)]";
    }

    @Override
    public void drain() {
        inner.drain();
    }

    @Override
    public void release() {
        inner.release();
    }
}
