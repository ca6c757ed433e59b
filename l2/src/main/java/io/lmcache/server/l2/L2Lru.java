package io.lmcache.server.l2;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One adapter's LRU order for L2 eviction (hybrid-and-l2.md §B.5), fed by the adapter's listener
 * events: stores and loads touch a key, deletions drop it, and files found at start (an earlier
 * process's) come before everything else, oldest first. Thread-safe (adapter workers feed it,
 * the eviction pass reads it).
 */
public final class L2Lru implements L2AdapterListener {
    /** Keys by recency, least recent first, with their sizes. */
    private LinkedHashMap<L2Key, Long> order = new LinkedHashMap<>(16, 0.75f, true);

    @Override
    public synchronized void onKeysStored(List<L2Key> keys, long[] sizes) {
        for (int i = 0; i < keys.size(); i++) {
            order.put(keys.get(i), sizes[i]);
        }
    }

    /** Files an earlier process left: least recent of all, in the order given (oldest first); a key known already keeps its place. */
    @Override
    public synchronized void onKeysFound(List<L2Key> keys, long[] sizes) {
        LinkedHashMap<L2Key, Long> reordered = new LinkedHashMap<>(Math.max(16, (order.size() + keys.size()) * 4 / 3), 0.75f, true);
        for (int i = 0; i < keys.size(); i++) {
            if (!order.containsKey(keys.get(i))) {
                reordered.put(keys.get(i), sizes[i]);
            }
        }
        reordered.putAll(order);
        order = reordered;
    }

    @Override
    public synchronized void onKeysAccessed(List<L2Key> keys) {
        for (L2Key key : keys) {
            order.get(key); // access order: a get makes it the most recent
        }
    }

    @Override
    public synchronized void onKeysDeleted(List<L2Key> keys) {
        keys.forEach(order::remove);
    }

    /** The least recently used keys whose sizes add up to at least {@code bytes} (fewer when there are not that many). */
    public synchronized List<L2Key> victims(long bytes) {
        List<L2Key> victims = new ArrayList<>();
        long total = 0;
        for (Iterator<Map.Entry<L2Key, Long>> it = order.entrySet().iterator(); it.hasNext() && total < bytes; ) {
            Map.Entry<L2Key, Long> entry = it.next();
            victims.add(entry.getKey());
            total += entry.getValue();
        }
        return victims;
    }

    public synchronized int size() {
        return order.size();
    }
}
