package io.lmcache.server.l2;

import java.lang.foreign.MemorySegment;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * fault_inject (hybrid-and-l2.md §B.7), for tests and diagnostics: a decorator that reports keys
 * present at lookup and then fails their load, which is how a real L2 read error looks and what
 * leaves a gapped found-set. Only the load result is touched (bits cleared, no unlock: the prefetch
 * controller releases every plan key itself); everything else goes to the inner adapter unchanged.
 */
public final class FaultInjectAdapter implements L2Adapter {
    private static final Logger LOG = LoggerFactory.getLogger(FaultInjectAdapter.class);

    private final L2Adapter inner;
    private final FaultRules rules;
    /** The key list of each load in flight, to map a dropped position to its key; removed when the result is handed out. */
    private final Map<Long, List<L2Key>> loadKeys = new ConcurrentHashMap<>();

    public FaultInjectAdapter(L2Adapter inner, FaultRules rules) {
        this.inner = inner;
        this.rules = rules;
        LOG.warn(String.format(Locale.ROOT, "FaultInjectL2Adapter ACTIVE (rate=%.3f seed=%d gap_indices=%s gap_tail_ratios=%s) wrapping %s"
                + " -- test/diagnostic use only.", rules.rate(), rules.seed(), List.copyOf(rules.gapIndices()), rules.gapTailRatios(),
                inner.typeName()));
    }

    @Override
    public String typeName() {
        return "FaultInjectL2Adapter";
    }

    @Override
    public void setCompletionSignals(CompletionSignals signals) {
        inner.setCompletionSignals(signals);
    }

    @Override
    public long submitStore(List<L2Key> keys, List<MemorySegment> objects) {
        return inner.submitStore(keys, objects);
    }

    @Override
    public Map<Long, StoreResult> popCompletedStores() {
        return inner.popCompletedStores();
    }

    @Override
    public long submitLookupAndLock(List<L2Key> keys, Map<Integer, Long> objectBytesByGroup) {
        return inner.submitLookupAndLock(keys, objectBytesByGroup);
    }

    @Override
    public Bitmap queryLookupAndLock(long taskId) {
        return inner.queryLookupAndLock(taskId);
    }

    @Override
    public void submitUnlock(List<L2Key> keys) {
        inner.submitUnlock(keys);
    }

    @Override
    public long submitLoad(List<L2Key> keys, List<MemorySegment> buffers) {
        // recorded before the inner task can finish: the result may be queried as soon as it lands
        long taskId;
        synchronized (loadKeys) {
            taskId = inner.submitLoad(keys, buffers);
            loadKeys.put(taskId, List.copyOf(keys));
        }
        return taskId;
    }

    @Override
    public Bitmap queryLoad(long taskId) {
        Bitmap loaded;
        List<L2Key> keys;
        synchronized (loadKeys) {
            loaded = inner.queryLoad(taskId);
            if (loaded == null) {
                return null;
            }
            keys = loadKeys.remove(taskId);
        }
        if (keys != null) {
            int[] dropped = rules.dropPositions(keys);
            for (int position : dropped) {
                if (position < loaded.size()) {
                    loaded.clear(position);
                }
            }
            if (dropped.length > 0) {
                LOG.debug("FaultInject: task {} dropped {}/{} load keys", taskId, dropped.length, keys.size());
            }
        }
        return loaded;
    }

    @Override
    public List<L2Key> delete(List<L2Key> keys) {
        return inner.delete(keys);
    }

    @Override
    public AdapterUsage usage() {
        return inner.usage();
    }

    @Override
    public boolean supportsGlobalEviction() {
        return inner.supportsGlobalEviction();
    }

    @Override
    public void registerListener(L2AdapterListener listener) {
        inner.registerListener(listener);
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
        settings.put("gap_indices", List.copyOf(rules.gapIndices()));
        settings.put("gap_tail_ratios", rules.gapTailRatios());
        status.put("fault_inject", settings);
        return status;
    }

    @Override
    public void close() {
        inner.close();
    }
}
